"""The New Harness page explains itself: the card picked is highlighted, Tasks and GPU are
explained, a GPU harness warns when no GPU worker is configured; read-only members see the
fields disabled; the home page's "add a harness" step."""

import re

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_the_catalog_card_picked_is_highlighted(owner):
    html = owner.web.get("/harnesses/new/?preset=openclaw").content.decode()
    selected = re.findall(r'class="card preset selected" data-preset="([\w-]+)"', html)
    assert selected == ["openclaw"]
    assert 'aria-current="true"' in html


def test_the_form_explains_tasks_and_compute(owner):
    html = owner.web.get("/harnesses/new/").content.decode()
    assert "$BELVEDIR_TASKS_FILE" in re.search(r'id="help-tasks">(.*?)</p>', html, re.S).group(1)
    assert "NVIDIA GPU" in re.search(r'id="help-compute">(.*?)</p>', html, re.S).group(1)


def test_a_gpu_harness_warns_when_no_gpu_worker_is_configured(owner, settings):
    settings.BELVEDIR_GPU_TYPES = {}
    html = owner.web.get("/harnesses/new/").content.decode()
    assert 'id="gpu-warning"' in html and "BELVEDIR_GPU_TYPES" in html
    settings.BELVEDIR_GPU_TYPES = {"A10G": 1}
    assert 'id="gpu-warning"' not in owner.web.get("/harnesses/new/").content.decode()


def test_read_only_members_see_the_harness_fields_disabled(readonly, harness):
    html = readonly.web.get(f"/harnesses/{harness.pk}/").content.decode()
    assert re.search(r"<fieldset\s+disabled>", html)
    assert "Save</button>" not in html


def test_writers_see_the_harness_fields_enabled(owner, harness):
    html = owner.web.get(f"/harnesses/{harness.pk}/").content.decode()
    assert not re.search(r"<fieldset\s+disabled>", html)


def test_the_harness_step_is_ticked_once_the_project_has_one(owner):
    url = "/harnesses/?fragment=onboarding-step"
    assert 'class="step" data-step="harness"' in owner.web.get(url, **HTMX).content.decode()
    owner.web.get("/")  # no side effects from looking
    from harnesses import services

    services.harness_create(
        project=owner.project,
        name="Mine",
        repo_url="https://github.com/example/h.git",
        run_command="python run.py",
        created_by=owner.user,
    )
    assert 'class="step done" data-step="harness"' in owner.web.get(url, **HTMX).content.decode()
