"""/api/v1/environments: list (paginated), create, read (a version), update (a new version),
delete, a harness from one; outsiders 404, read-only members 403, bad input 400 naming the field."""

import json

from harnesses.tasks_format import MAX_BYTES

TASKS = [
    {"id": "capital", "prompt": "Capital of France?", "answer": "Paris"},
    {
        "id": "refund",
        "prompt": "A refund after 40 days?",
        "verifier": {"kind": "rubric", "criteria": ["Cites the 30-day policy"]},
    },
]
BODY = {"name": "Support", "description": "Refund questions", "tasks": TASKS}


def create(tenant, body=BODY):
    response = tenant.api.post("/api/v1/environments", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_owner_creates_lists_and_reads_an_environment(owner):
    created = create(owner)
    assert created["id"].startswith("env_") and created["version"] == 1
    assert created["tasks"][0]["verifier"] == {"kind": "judge"}
    listed = owner.api.get("/api/v1/environments?limit=1").json()
    assert listed["count"] == 1 and listed["results"][0]["task_count"] == 2
    assert "tasks" not in listed["results"][0]
    got = owner.api.get(f"/api/v1/environments/{created['id']}").json()
    assert got["tasks"] == created["tasks"]


def test_the_list_is_paginated(owner):
    for n in range(3):
        create(owner, {**BODY, "name": f"Env {n}"})
    page = owner.api.get("/api/v1/environments?limit=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]


def test_tasks_may_be_a_tasks_files_text(owner):
    created = create(owner, {"name": "Lines", "tasks": "What is 2+2?\nName a prime.\n"})
    assert [t["id"] for t in created["tasks"]] == ["task-1", "task-2"]


def test_an_update_makes_a_new_version_and_old_versions_stay_readable(owner):
    env_id = create(owner)["id"]
    updated = owner.api.patch(
        f"/api/v1/environments/{env_id}", {"tasks": TASKS[:1]}, format="json"
    ).json()
    assert updated["version"] == 2 and updated["task_count"] == 1
    old = owner.api.get(f"/api/v1/environments/{env_id}?version=1").json()
    assert len(old["tasks"]) == 2
    versions = owner.api.get(f"/api/v1/environments/{env_id}/versions").json()
    assert [(v["number"], v["task_count"]) for v in versions["results"]] == [(2, 1), (1, 2)]
    missing = owner.api.get(f"/api/v1/environments/{env_id}?version=9")
    assert missing.status_code == 400 and "version" in missing.json()


def test_delete_removes_the_environment(owner):
    env_id = create(owner)["id"]
    assert owner.api.delete(f"/api/v1/environments/{env_id}").status_code == 204
    assert owner.api.get(f"/api/v1/environments/{env_id}").status_code == 404


def test_outsider_gets_404(owner, outsider):
    env_id = create(owner)["id"]
    assert outsider.api.get(f"/api/v1/environments/{env_id}").status_code == 404
    assert outsider.api.delete(f"/api/v1/environments/{env_id}").status_code == 404
    assert outsider.api.get("/api/v1/environments").json()["count"] == 0


def test_read_only_member_reads_but_cannot_write(owner, readonly):
    env_id = create(owner)["id"]
    assert readonly.api.get(f"/api/v1/environments/{env_id}").status_code == 200
    assert readonly.api.post("/api/v1/environments", BODY, format="json").status_code == 403
    patch = readonly.api.patch(f"/api/v1/environments/{env_id}", {"name": "x"}, format="json")
    assert patch.status_code == 403
    assert readonly.api.delete(f"/api/v1/environments/{env_id}").status_code == 403
    harness = readonly.api.post(
        f"/api/v1/environments/{env_id}/harness", {"preset": "runner"}, format="json"
    )
    assert harness.status_code == 403


def test_bad_tasks_are_refused_naming_the_task_and_field(owner):
    bad = [TASKS[0], {"id": "oops", "prompt": "p", "verifier": {"kind": "magic"}}]
    response = owner.api.post("/api/v1/environments", {**BODY, "tasks": bad}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "tasks[1].verifier.kind": [
            "tasks[1] (id 'oops'): verifier.kind 'magic' is not one of judge, rubric, code, "
            "state_diff."
        ]
    }


def test_bad_task_files_are_refused_with_messages_naming_the_field(owner):
    cases = {
        '[{"id": "a", "prompt": "x"': "tasks",
        json.dumps([{"id": "c", "prompt": "p", "verifier": {"kind": "code", "source": "x=1"}}]): (
            "tasks[0].verifier.source"
        ),
        "x" * (MAX_BYTES + 10): "tasks",
    }
    for text, field in cases.items():
        response = owner.api.post(
            "/api/v1/environments", {"name": "F", "tasks": text}, format="json"
        )
        assert response.status_code == 400
        assert list(response.json()) == [field]


def test_missing_name_and_tasks_are_named(owner):
    response = owner.api.post("/api/v1/environments", {"tasks": TASKS}, format="json")
    assert response.status_code == 400 and "name" in response.json()
    response = owner.api.post("/api/v1/environments", {"name": "x"}, format="json")
    assert response.status_code == 400 and "tasks" in response.json()


def test_a_harness_from_an_environment_through_the_api(owner):
    env_id = create(owner)["id"]
    response = owner.api.post(
        f"/api/v1/environments/{env_id}/harness", {"preset": "runner"}, format="json"
    )
    assert response.status_code == 201, response.json()
    harness = response.json()
    assert harness["preset"] == "runner"
    assert [t["id"] for t in json.loads(harness["tasks"])] == ["capital", "refund"]
    refused = owner.api.post(
        f"/api/v1/environments/{env_id}/harness", {"preset": "qm"}, format="json"
    )
    assert refused.status_code == 400
    assert "The QM card is not yet available" in refused.json()["preset"][0]
