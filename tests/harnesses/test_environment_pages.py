"""Environment pages: list, detail (tasks, versions), the task editor (new, edit, import),
delete, "Use in a harness", generation with its preview; outsiders 404, read-only 403."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from harnesses import environments, generation
from harnesses.models import Environment, EnvironmentGeneration, Harness
from tests.helpers.scripted_model import ScriptedModel

TASKS = [
    {"id": "capital", "prompt": "Capital of France?", "answer": "Paris"},
    {
        "id": "refund",
        "prompt": "A refund after 40 days?",
        "verifier": {"kind": "rubric", "criteria": ["Cites the 30-day policy", "Offers credit"]},
    },
]


def make(owner, tasks=TASKS):
    return environments.environment_create(project=owner.project, name="Support", tasks=tasks)


def editor_post(name="Edited", rows=(), **extra) -> dict:
    data = {"name": name, "description": "", "task-count": str(len(rows)), **extra}
    for i, row in enumerate(rows):
        for key, value in row.items():
            data[f"t-{i}-{key}"] = value
    return data


def test_the_list_and_detail_show_tasks_and_versions(owner):
    env = make(owner)
    environments.environment_update(environment=env, tasks=TASKS[:1])
    listed = owner.web.get("/environments/").content.decode()
    assert "Support" in listed and "v2" in listed
    page = owner.web.get(f"/environments/{env.pk}/").content.decode()
    assert 'data-task="capital"' in page and 'data-task="refund"' not in page
    assert "?version=1" in page and "current" in page
    old = owner.web.get(f"/environments/{env.pk}/?version=1").content.decode()
    assert "Cites the 30-day policy" in old and "the current one is" in old
    assert owner.web.get(f"/environments/{env.pk}/?version=7").status_code == 400


def test_the_editor_creates_an_environment_with_each_verifier_kind(owner):
    rows = [
        {"id": "a", "prompt": "Capital?", "answer": "Paris", "kind": "judge"},
        {
            "id": "b",
            "prompt": "Refund?",
            "kind": "rubric",
            "criteria": "Cites policy\r\nPolite\r\n",
        },
        {
            "id": "c",
            "prompt": "2+2",
            "answer": "4",
            "kind": "code",
            "source": "def verify(answer, state):\r\n    return answer == '4'\r\n",
        },
        {
            "id": "d",
            "prompt": "Fix config",
            "kind": "state_diff",
            "setup-count": "1",
            "setup-0-path": "app/c.ini",
            "setup-0-text": "debug=true",
            "golden-count": "2",
            "golden-0-path": "app/c.ini",
            "golden-0-text": "debug=false",
            "golden-1-path": "",
            "golden-1-text": "",
        },
    ]
    response = owner.web.post("/environments/new/", editor_post("Kinds", rows, action="save"))
    assert response.status_code == 303
    env = Environment.objects.get(project=owner.project)
    tasks = environments.environment_tasks(environment=env)
    assert [t["verifier"]["kind"] for t in tasks] == ["judge", "rubric", "code", "state_diff"]
    assert tasks[1]["verifier"]["criteria"] == ["Cites policy", "Polite"]
    assert (
        tasks[2]["verifier"]["source"] == "def verify(answer, state):\n    return answer == '4'\n"
    )
    assert tasks[3]["verifier"] == {
        "kind": "state_diff",
        "setup_state": {"app/c.ini": "debug=true"},
        "golden": {"app/c.ini": "debug=false"},
    }


def test_a_bad_task_is_shown_on_its_row_naming_the_field(owner):
    rows = [
        {"id": "a", "prompt": "fine", "kind": "judge"},
        {"id": "b", "prompt": "p", "kind": "code", "source": "print(1)"},
    ]
    response = owner.web.post("/environments/new/", editor_post("Bad", rows, action="save"))
    assert response.status_code == 400
    page = response.content.decode()
    assert "tasks[1] (id &#x27;b&#x27;): verifier.source must define verify(answer, state)" in page
    assert 'class="task has-error" data-index="1"' in page
    assert 'value="print(1)"' in page or "print(1)</textarea>" in page  # nothing typed is lost
    assert not Environment.objects.exists()


def test_editor_buttons_redraw_the_editor_as_an_htmx_fragment(owner):
    # As a browser sends it: the one blank golden file row the editor draws.
    blank_file = {"golden-count": "1", "golden-0-path": "", "golden-0-text": ""}
    rows = [{"id": "a", "prompt": "p", "kind": "state_diff", **blank_file}]
    headers = {"HTTP_HX_REQUEST": "true"}
    added = owner.web.post("/environments/new/", editor_post("X", rows, action="add"), **headers)
    html = added.content.decode()
    assert added.status_code == 200 and "<html" not in html
    assert 'name="task-count" value="2"' in html
    filed = owner.web.post(
        "/environments/new/", editor_post("X", rows, action="file-0-golden"), **headers
    ).content.decode()
    assert 'name="t-0-golden-count" value="2"' in filed
    removed = owner.web.post(
        "/environments/new/", editor_post("X", rows, action="remove-0"), **headers
    ).content.decode()
    assert 'name="task-count" value="0"' in removed


def test_importing_a_tasks_file_fills_the_editor_and_a_bad_file_is_named(owner):
    upload = SimpleUploadedFile("tasks.jsonl", "\n".join(json.dumps(t) for t in TASKS).encode())
    response = owner.web.post(
        "/environments/new/", {**editor_post("Imported"), "action": "import", "tasks_file": upload}
    )
    page = response.content.decode()
    assert response.status_code == 200 and 'name="task-count" value="2"' in page
    assert "Cites the 30-day policy\nOffers credit</textarea>" in page
    bad = SimpleUploadedFile(
        "bad.json", b'[{"id": "x", "prompt": "p", "verifier": {"kind": "no"}}]'
    )
    refused = owner.web.post(
        "/environments/new/", {**editor_post("Imported"), "action": "import", "tasks_file": bad}
    )
    assert refused.status_code == 400
    assert "tasks[0] (id &#x27;x&#x27;): verifier.kind &#x27;no&#x27; is not one of" in (
        refused.content.decode()
    )


def test_editing_saves_a_new_version_and_keeps_metadata(owner):
    env = make(owner, [{**TASKS[0], "metadata": {"source": "faq"}}])
    form = owner.web.get(f"/environments/{env.pk}/edit/").content.decode()
    assert "Capital of France?</textarea>" in form
    rows = [
        {"id": "capital", "prompt": "Capital of Italy?", "answer": "Rome", "kind": "judge"},
    ]
    rows[0]["metadata"] = '{"source": "faq"}'
    response = owner.web.post(f"/environments/{env.pk}/edit/", editor_post("Support", rows))
    assert response.status_code == 303
    env.refresh_from_db()
    assert env.version == 2
    task = environments.environment_tasks(environment=env)[0]
    assert task["answer"] == "Rome" and task["metadata"] == {"source": "faq"}


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_use_in_a_harness_and_refusals_naming_the_card(owner):
    env = make(owner)
    response = owner.web.post(f"/environments/{env.pk}/harness/", {"preset": "harbor-runner"})
    harness = Harness.objects.get(project=owner.project)
    assert response.status_code == 303 and response["Location"] == f"/harnesses/{harness.pk}/"
    assert json.loads(harness.tasks)[1]["id"] == "refund"
    page = owner.web.get(f"/environments/{env.pk}/").content.decode()
    assert 'data-preset="mastra" aria-disabled="true"' in page
    refused = owner.web.post(f"/environments/{env.pk}/harness/", {"preset": "mastra"})
    assert refused.status_code == 400
    assert "The Mastra card is not yet available" in refused.content.decode()


def test_delete(owner):
    env = make(owner)
    response = owner.web.post(f"/environments/{env.pk}/delete/")
    assert response.status_code == 303 and not Environment.objects.exists()


def test_outsiders_get_404_and_read_only_members_403(owner, outsider, readonly):
    env = make(owner)
    assert outsider.web.get(f"/environments/{env.pk}/").status_code == 404
    assert outsider.web.post(f"/environments/{env.pk}/delete/").status_code == 404
    assert readonly.web.get(f"/environments/{env.pk}/").status_code == 200
    assert readonly.web.post(f"/environments/{env.pk}/delete/").status_code == 403
    assert (
        readonly.web.post(f"/environments/{env.pk}/harness/", {"preset": "runner"}).status_code
        == 403
    )
    assert readonly.web.post("/environments/new/", editor_post("X")).status_code == 403
    assert readonly.web.post(f"/environments/{env.pk}/edit/", editor_post("X")).status_code == 403
    assert readonly.web.post("/environments/generate/", {}).status_code == 403


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_generate_shows_progress_then_a_preview_to_save(owner):
    with ScriptedModel([json.dumps(TASKS)]) as model:
        response = owner.web.post(
            "/environments/generate/",
            {
                "description": "Refund questions",
                "name": "Generated",
                "count": "2",
                "model": "acme/writer-1",
                "model_api_base": model.base_url,
                "model_api_key": "sk-test",
                "preset": "harbor-runner",
            },
        )
        row = EnvironmentGeneration.objects.get(project=owner.project)
        assert response.status_code == 303 and response["Location"] == (
            f"/environments/generations/{row.pk}/"
        )
        waiting = owner.web.get(
            f"/environments/generations/{row.pk}/?poll=1", HTTP_HX_REQUEST="true"
        )
        assert 'data-status="queued"' in waiting.content.decode()
        assert "every 1s" in waiting.content.decode()
        generation.generation_execute(generation_id=row.pk)
    done = owner.web.get(f"/environments/generations/{row.pk}/?poll=1", HTTP_HX_REQUEST="true")
    assert done.headers["HX-Redirect"] == f"/environments/generations/{row.pk}/"
    preview = owner.web.get(f"/environments/generations/{row.pk}/").content.decode()
    assert "Review the generated tasks" in preview and "Capital of France?</textarea>" in preview
    assert 'value="harbor-runner" checked' in preview
    rows = [{"id": "capital", "prompt": "Capital of France?", "answer": "Paris", "kind": "judge"}]
    saved = owner.web.post(
        f"/environments/generations/{row.pk}/",
        editor_post("Generated", rows, preset="harbor-runner", action="save"),
    )
    env = Environment.objects.get(project=owner.project)
    assert saved.status_code == 303 and saved["Location"] == f"/environments/{env.pk}/"
    assert env.task_count == 1
    assert Harness.objects.get(project=owner.project).preset == "harbor-runner"
    after = owner.web.get(f"/environments/generations/{row.pk}/").content.decode()
    assert "Saved as" in after
    assert "Generated, not saved yet" not in owner.web.get("/environments/").content.decode()


def test_the_list_shows_generations_waiting_for_review(owner):
    with ScriptedModel([json.dumps(TASKS)]) as model:
        owner.web.post(
            "/environments/generate/",
            {
                "description": "Refund questions",
                "name": "Later",
                "count": "2",
                "model": "acme/writer-1",
                "model_api_base": model.base_url,
                "preset": "",
            },
        )
        row = EnvironmentGeneration.objects.get(project=owner.project)
        generation.generation_execute(generation_id=row.pk)
    page = owner.web.get("/environments/").content.decode()
    assert "Generated, not saved yet" in page and "ready to review" in page
    assert f"/environments/generations/{row.pk}/" in page


def test_a_generate_form_refusal_names_the_field(owner):
    response = owner.web.post(
        "/environments/generate/",
        {"description": "Refunds", "count": "3", "model": "acme/uncovered", "preset": ""},
    )
    assert response.status_code == 400
    assert 'data-field="model_api_key"' in response.content.decode()
