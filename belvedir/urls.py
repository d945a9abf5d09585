from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from belvedir import api, member_views, views
from belvedir.forms import EmailLoginForm
from billing import api as billing_api
from harnesses import api as harness_api
from harnesses import environment_api, git_views
from models_registry import api as models_api
from runs import adapters as run_adapters
from runs import api as run_api
from runs import task_sandbox_api
from traces import api as trace_api
from traces import ingest

api_v1 = [
    path("project", api.ProjectView.as_view(), name="api-project"),
    path("keys", api.ApiKeyListView.as_view(), name="api-keys"),
    path("keys/<str:key_id>", api.ApiKeyDetailView.as_view(), name="api-key"),
    path("harnesses", harness_api.HarnessListView.as_view(), name="api-harnesses"),
    path("harnesses/<str:harness_id>", harness_api.HarnessDetailView.as_view(), name="api-harness"),
    path("catalog", harness_api.CatalogView.as_view(), name="api-catalog"),
    path("environments", environment_api.EnvironmentListView.as_view(), name="api-environments"),
    path(
        "environments/generate",
        environment_api.EnvironmentGenerateView.as_view(),
        name="api-environments-generate",
    ),
    path(
        "environments/generations/<str:generation_id>",
        environment_api.GenerationDetailView.as_view(),
        name="api-environment-generation",
    ),
    path(
        "environments/generations/<str:generation_id>/save",
        environment_api.GenerationSaveView.as_view(),
        name="api-environment-generation-save",
    ),
    path(
        "environments/<str:environment_id>",
        environment_api.EnvironmentDetailView.as_view(),
        name="api-environment",
    ),
    path(
        "environments/<str:environment_id>/versions",
        environment_api.EnvironmentVersionListView.as_view(),
        name="api-environment-versions",
    ),
    path(
        "environments/<str:environment_id>/export",
        run_api.RunEnvironmentExportView.as_view(),  # the run keys' limits live with runs
        name="api-environment-export",
    ),
    path(
        "environments/<str:environment_id>/harness",
        environment_api.EnvironmentHarnessView.as_view(),
        name="api-environment-harness",
    ),
    path("traces", ingest.traces, name="api-traces"),
    path("outcomes", ingest.outcomes, name="api-outcomes"),
    path("sessions", trace_api.SessionListView.as_view(), name="api-sessions"),
    path("sessions/<str:session_id>", trace_api.SessionDetailView.as_view(), name="api-session"),
    path("task-groups", trace_api.TaskGroupListView.as_view(), name="api-task-groups"),
    path(
        "task-groups/<str:group_id>", trace_api.TaskGroupDetailView.as_view(), name="api-task-group"
    ),
    path("billing", billing_api.BillingView.as_view(), name="api-billing"),
    path("billing/ledger", billing_api.LedgerView.as_view(), name="api-billing-ledger"),
    path(
        "billing/coupons/redeem",
        billing_api.CouponRedeemView.as_view(),
        name="api-billing-coupon-redeem",
    ),
    path("runs", run_api.RunListView.as_view(), name="api-runs"),
    path("runs/<str:run_id>", run_api.RunDetailView.as_view(), name="api-run"),
    path("runs/<str:run_id>/cancel", run_api.RunCancelView.as_view(), name="api-run-cancel"),
    path("runs/<str:run_id>/log", run_api.RunLogView.as_view(), name="api-run-log"),
    path("runs/<str:run_id>/tasks", run_api.RunTasksView.as_view(), name="api-run-tasks"),
    path(
        "runs/<str:run_id>/task-sandboxes",
        task_sandbox_api.RunTaskSandboxesView.as_view(),
        name="api-run-task-sandboxes",
    ),
    path(
        "task-sandboxes",
        task_sandbox_api.TaskSandboxCreateView.as_view(),
        name="api-task-sandboxes",
    ),
    path(
        "task-sandboxes/<str:sandbox_id>",
        task_sandbox_api.TaskSandboxDetailView.as_view(),
        name="api-task-sandbox",
    ),
    path(
        "task-sandboxes/<str:sandbox_id>/exec",
        task_sandbox_api.TaskSandboxExecView.as_view(),
        name="api-task-sandbox-exec",
    ),
    path(
        "task-sandboxes/<str:sandbox_id>/files",
        task_sandbox_api.TaskSandboxFilesView.as_view(),
        name="api-task-sandbox-files",
    ),
    path(
        "adapters/<str:run_id>/<str:token>",
        run_adapters.AdapterDownloadView.as_view(),
        name="api-adapter-download",
    ),
    path("models/<str:model_id>/runs", run_api.ModelRunLaunchView.as_view(), name="api-model-runs"),
    path(
        "models/<str:model_id>/benchmarks",
        run_api.ModelBenchmarksView.as_view(),
        name="api-model-benchmarks",
    ),
    path("models/fine-tuned", models_api.FineTunedModelListView.as_view(), name="api-models-list"),
    path("models/<str:model_id>", models_api.FineTunedModelDetailView.as_view(), name="api-model"),
    # The model router (OpenAI-compatible): chat/completions and models (GET; a POST there
    # uploads a fine-tuned model).
    path("", include("router.urls")),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("signup/", views.signup, name="signup"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="belvedir/login.html", authentication_form=EmailLoginForm
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("switch/", views.switch, name="switch"),
    path("settings/project/", views.project_settings, name="project-settings"),
    path(
        "settings/project/chinese-models/",
        views.project_chinese_models,
        name="project-chinese-models",
    ),
    path("settings/project/keys/new/", views.api_key_create, name="api-key-create"),
    path("settings/project/keys/<str:key_id>/revoke/", views.api_key_revoke, name="api-key-revoke"),
    path(
        "settings/organization/", member_views.organization_settings, name="organization-settings"
    ),
    path("settings/organization/members/new/", member_views.member_invite, name="member-invite"),
    path(
        "settings/organization/members/<str:member_id>/role/",
        member_views.member_role,
        name="member-role",
    ),
    path(
        "settings/organization/members/<str:member_id>/remove/",
        member_views.member_remove,
        name="member-remove",
    ),
    path(
        "settings/organization/invitations/<str:invitation_id>/cancel/",
        member_views.invitation_cancel,
        name="invitation-cancel",
    ),
    path("settings/organization/projects/new/", member_views.project_create, name="project-create"),
    path("invitations/<str:token>/", member_views.invitation, name="invitation"),
    path(
        "invitations/<str:token>/accept/", member_views.invitation_accept, name="invitation-accept"
    ),
    path(
        "invitations/<str:token>/signup/", member_views.invitation_signup, name="invitation-signup"
    ),
    path("settings/organization/billing/", include("billing.urls")),
    path("settings/organization/audit/", views.organization_audit, name="organization-audit"),
    path("harnesses/", include("harnesses.urls")),
    path("environments/", include("harnesses.environment_urls")),
    path("runs/", include("runs.urls")),
    path("models/", include("models_registry.urls")),
    path("traces/", include("traces.urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script as a file of its own (?script=), not
    # inline, as the Content-Security-Policy asks; belvedir/api_docs.html drops its inline style.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="schema", template_name="belvedir/api_docs.html"
        ),
        name="api-docs",
    ),
    path("api/v1/", include(api_v1)),
    # The drivers shipped with the platform, as read-only git repositories (dumb HTTP).
    path("git/<str:name>.git/<path:path>", git_views.git_file, name="driver-git"),
]

handler500 = "belvedir.views.server_error"
