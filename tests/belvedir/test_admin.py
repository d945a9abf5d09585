"""The Django admin: every model registered, changelists load, harnesses checked by the policy."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

from harnesses.admin import HarnessAdminForm
from harnesses.models import Harness

APPS = ["belvedir", "harnesses", "runs", "traces", "billing", "models_registry", "router"]


def _models(app_label):
    try:
        return list(apps.get_app_config(app_label).get_models())
    except LookupError:
        return []


@pytest.mark.parametrize("app_label", APPS)
def test_every_model_of_the_app_is_in_the_admin(app_label):
    missing = [m.__name__ for m in _models(app_label) if m not in admin.site._registry]
    assert missing == [], f"not registered in the admin: {missing}"


@pytest.mark.parametrize("app_label", APPS)
def test_every_changelist_of_the_app_loads_for_an_operator(superuser, owner, harness, app_label):
    for model in _models(app_label):
        if model not in admin.site._registry:
            continue
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        response = superuser.get(url)
        assert response.status_code == 200, url
        searched = superuser.get(url, {"q": "x"})
        assert searched.status_code == 200, f"{url}?q=x"


def test_harness_and_key_change_pages_load(superuser, owner, harness):
    from django.contrib.admin.utils import quote

    from belvedir.models import ApiKey

    key = ApiKey.objects.get(project=owner.project)
    assert (
        superuser.get(
            reverse("admin:harnesses_harness_change", args=[quote(harness.pk)])
        ).status_code
        == 200
    )
    assert (
        superuser.get(reverse("admin:belvedir_apikey_change", args=[quote(key.pk)])).status_code
        == 200
    )
    assert (
        superuser.get(
            reverse("admin:belvedir_organization_change", args=[quote(owner.org.pk)])
        ).status_code
        == 200
    )


def test_members_are_not_let_into_the_admin(owner):
    response = owner.web.get(reverse("admin:harnesses_harness_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_operator_revokes_keys_with_the_admin_action(superuser, owner):
    from belvedir.models import ApiKey

    key = ApiKey.objects.get(project=owner.project)
    response = superuser.post(
        reverse("admin:belvedir_apikey_changelist"),
        {"action": "revoke_keys", "_selected_action": [key.pk]},
    )
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert owner.api.get("/api/v1/harnesses").status_code == 401


def _admin_form_data(owner, **change):
    data = {
        "project": owner.project.pk,
        "name": "Admin made",
        "repo_url": "https://github.com/example/harness.git",
        "ref": "",
        "install_command": "",
        "run_command": "python run.py",
        "env": '{"MODEL": "x"}',
        "compute": "cpu",
        "gpu_type": "",
        "tasks": "",
        "preset": "",
        "created_by": "",
    }
    return {**data, **change}


@pytest.mark.parametrize(
    "change,field,words",
    [
        ({"env": '{"PATH": "/x"}'}, "env", "PATH"),
        ({"env": '{"https_proxy": "http://p"}'}, "env", "https_proxy"),
        ({"env": '["MODEL=x"]'}, "env", "object"),
        ({"repo_url": "http://example.com/h.git"}, "repo_url", "git URL"),
        ({"tasks": "a" * (512 * 1024 + 1)}, "tasks", "512 KB"),
        ({"compute": "gpu", "gpu_type": "RTX9090"}, "gpu_type", "A10G"),
        ({"preset": "mastra"}, "preset", "Mastra"),
    ],
)
def test_admin_harness_form_refuses_what_the_api_refuses_naming_the_field(
    owner, change, field, words
):
    form = HarnessAdminForm(data=_admin_form_data(owner, **change))
    assert not form.is_valid()
    assert words in " ".join(form.errors[field])


def test_admin_harness_form_accepts_a_valid_harness_and_normalises_it(owner):
    form = HarnessAdminForm(data=_admin_form_data(owner, compute="gpu", gpu_type=""))
    assert form.is_valid(), form.errors
    harness = form.save()
    assert harness.gpu_type == "A10G" and harness.env == {"MODEL": "x"}


def test_admin_harness_form_refuses_a_duplicate_name_in_the_project(owner, harness):
    form = HarnessAdminForm(data=_admin_form_data(owner, name="Smoke"))
    assert not form.is_valid()
    assert "name" in form.errors or "__all__" in form.errors


def test_admin_keeps_a_harness_on_a_card_that_has_since_become_unavailable(owner, harness):
    Harness.objects.filter(pk=harness.pk).update(preset="mastra")
    harness.refresh_from_db()
    data = _admin_form_data(owner, name="Smoke", preset="mastra", run_command="python other.py")
    form = HarnessAdminForm(data=data, instance=harness)
    assert form.is_valid(), form.errors
    assert form.save().preset == "mastra"


def test_operator_adding_a_harness_with_path_in_env_sees_the_error_in_the_admin(superuser, owner):
    response = superuser.post(
        reverse("admin:harnesses_harness_add"), _admin_form_data(owner, env='{"PATH": "/x"}')
    )
    assert response.status_code == 200
    assert "PATH" in " ".join(response.context["adminform"].form.errors["env"])
    assert not Harness.objects.filter(name="Admin made").exists()


def test_operator_adds_a_valid_harness_in_the_admin(superuser, owner):
    response = superuser.post(reverse("admin:harnesses_harness_add"), _admin_form_data(owner))
    assert response.status_code == 302
    assert Harness.objects.get(name="Admin made").project == owner.project


def _run_with_key(owner, harness):
    from belvedir.models import ApiKey
    from belvedir.services import api_key_create
    from runs.models import Run

    run = Run.objects.create(project=owner.project, harness=harness, harness_name=harness.name)
    run.ingest_key, _ = api_key_create(
        project=owner.project, name=f"run {run.pk}", kind=ApiKey.Kind.RUN
    )
    run.save(update_fields=["ingest_key"])
    return run


def test_deleting_a_run_in_the_admin_deletes_its_key_too(superuser, owner, harness):
    from belvedir.models import ApiKey
    from runs.models import Run

    run, kept = _run_with_key(owner, harness), _run_with_key(owner, harness)
    url = reverse("admin:runs_run_delete", args=[run.pk])
    assert superuser.post(url, {"post": "yes"}).status_code == 302

    assert not Run.objects.filter(pk=run.pk).exists()
    assert not ApiKey.objects.filter(pk=run.ingest_key_id).exists()
    assert ApiKey.objects.filter(pk=kept.ingest_key_id).exists()
    assert ApiKey.objects.filter(kind=ApiKey.Kind.PROJECT).exists()  # the project's key stays


def test_deleting_runs_in_bulk_in_the_admin_deletes_their_keys_too(superuser, owner, harness):
    from belvedir.models import ApiKey
    from runs.models import Run

    runs = [_run_with_key(owner, harness) for _ in range(2)]
    response = superuser.post(
        reverse("admin:runs_run_changelist"),
        {"action": "delete_selected", "_selected_action": [r.pk for r in runs], "post": "yes"},
    )
    assert response.status_code == 302
    assert not Run.objects.exists()
    assert not ApiKey.objects.filter(kind=ApiKey.Kind.RUN).exists()


def test_every_app_reads_as_words_in_the_admin_not_as_its_module_name(superuser):
    names = {label: apps.get_app_config(label).verbose_name for label in APPS}
    assert {label: name for label, name in names.items() if "_" in name} == {}
    index = superuser.get(reverse("admin:index")).content.decode()
    for label in APPS:
        if _models(label):  # an app with no models has no admin section
            assert f">{names[label]}</a>" in index, names[label]
    assert "Models_Registry" not in index and "MODELS_REGISTRY" not in index
