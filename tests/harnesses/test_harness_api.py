import pytest

HARNESS = {
    "name": "Smoke",
    "repo_url": "https://github.com/example/harness.git",
    "install_command": "pip install -r requirements.txt",
    "run_command": "python run.py",
    "env": {"MODEL": "openai/gpt-4.1-mini"},
}


def test_owner_creates_and_reads_back_a_harness(owner):
    created = owner.api.post("/api/v1/harnesses", HARNESS, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["id"].startswith("har_")
    assert body["compute"] == "cpu" and body["gpu_type"] == ""
    got = owner.api.get(f"/api/v1/harnesses/{body['id']}").json()
    assert got["env"] == {"MODEL": "openai/gpt-4.1-mini"}


def test_outsider_gets_404_for_another_organizations_harness(owner, outsider):
    harness_id = owner.api.post("/api/v1/harnesses", HARNESS, format="json").json()["id"]
    assert outsider.api.get(f"/api/v1/harnesses/{harness_id}").status_code == 404
    assert outsider.api.delete(f"/api/v1/harnesses/{harness_id}").status_code == 404


def test_read_only_member_can_read_but_not_write(owner, readonly):
    harness_id = owner.api.post("/api/v1/harnesses", HARNESS, format="json").json()["id"]
    assert readonly.api.get(f"/api/v1/harnesses/{harness_id}").status_code == 200
    assert (
        readonly.api.patch(
            f"/api/v1/harnesses/{harness_id}", {"name": "x"}, format="json"
        ).status_code
        == 403
    )
    assert readonly.api.post("/api/v1/harnesses", HARNESS, format="json").status_code == 403


@pytest.mark.parametrize(
    "key",
    [
        "PATH",
        "HOME",
        "http_proxy",
        "HTTPS_PROXY",
        "No_Proxy",
        "ALL_PROXY",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PYTHONHOME",
        "BELVEDIR_RUN_ID",
        "FRACTAL_API_KEY",
        "1BAD",
        "BAD-NAME",
    ],
)
def test_refused_env_keys_are_named_in_the_error(owner, key):
    response = owner.api.post("/api/v1/harnesses", {**HARNESS, "env": {key: "x"}}, format="json")
    assert response.status_code == 400
    assert key in response.json()["env"][0]


@pytest.mark.parametrize(
    "key",
    ["MODEL", "MODEL_API_KEY", "HARBOR_AGENT", "PYTHONPATH", "path_extra", "BELVEDIR_AGENT_URL"],
)
def test_ordinary_env_keys_are_accepted(owner, key):
    response = owner.api.post("/api/v1/harnesses", {**HARNESS, "env": {key: "x"}}, format="json")
    assert response.status_code == 201, response.json()


def test_creating_from_an_unavailable_card_is_refused_naming_the_card(owner):
    response = owner.api.post("/api/v1/harnesses", {"preset": "mastra"}, format="json")
    assert response.status_code == 400
    assert "Mastra" in response.json()["preset"][0]


@pytest.mark.usefixtures("owner_pays_as_you_go")
def test_creating_from_a_card_prefills_every_field(owner):
    body = owner.api.post(
        "/api/v1/harnesses", {"preset": "swe-bench-verified"}, format="json"
    ).json()
    assert body["env"]["HARBOR_AGENT"] == "terminus-2"
    assert body["env"]["HARBOR_N_TASKS"] == "5"
    assert body["preset"] == "swe-bench-verified"
