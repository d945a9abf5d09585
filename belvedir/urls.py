from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from belvedir import api, docs_pages, member_views, sdk_package, views
from belvedir.dispatch import by_method
from belvedir.forms import EmailLoginForm

# Each app's URLs are included by their module's name, so the ground floor imports no app
# (the floors contract in pyproject.toml). Where two apps' patterns could both match a path,
# the earlier include wins, as one list did: harnesses' environments/generations/<id> before
# runs' environments/<id>/export, scores' runs/compare before runs' runs/<id>.
api_v1 = [
    path("project", api.ProjectView.as_view(), name="api-project"),
    path("keys", api.ApiKeyListView.as_view(), name="api-keys"),
    path("keys/<str:key_id>", api.ApiKeyDetailView.as_view(), name="api-key"),
    path("", include("harnesses.api_urls")),
    path("", include("traces.api_urls")),
    path("", include("billing.api_urls")),
    path("", include("scores.api_urls")),
    path("", include("runs.api_urls")),
    path("", include("harbor.api_urls")),
    path("", include("models_registry.api_urls")),
    # The model router (OpenAI-compatible): chat/completions and models; a POST on models is a
    # fine-tuned model's upload (the REST API of models_registry shares the path).
    path(
        "models",
        by_method(
            default="router.views.models", POST="models_registry.api.FineTunedModelUploadView"
        ),
        name="router-models",
    ),
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
    path("", include("scores.urls")),  # /runs/compare/, before runs' /runs/<run id>/
    path("runs/", include("runs.urls")),
    path("models/", include("models_registry.urls")),
    path("traces/", include("traces.urls")),
    path("harbor/", include("harbor.urls")),
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
    path("git/", include("harnesses.git_urls")),
    path("sdk/node/belvedir.tgz", sdk_package.node_package, name="sdk-node-package"),
    path("docs/<str:name>.md", docs_pages.doc_page, name="doc-page"),
]

handler500 = "belvedir.views.server_error"
