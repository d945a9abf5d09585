"""The harness policy as tables: env keys, the Tasks cap, repo URLs; directly and via the API."""

import pytest

from belvedir.errors import DomainError
from harnesses import policy
from harnesses.env_secrets import is_secret_name
from harnesses.policy import TASKS_MAX_BYTES, env_key_refusal

HARNESS = {
    "name": "Smoke",
    "repo_url": "https://github.com/example/harness.git",
    "run_command": "python run.py",
}

REFUSED_ENV_KEYS = [
    # build and loader variables that change how the sandbox installs or runs
    "PATH",
    "HOME",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "PYTHONHOME",
    "LD_AUDIT",
    "BASH_ENV",
    # proxy settings, in any case
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "No_Proxy",
    "ALL_PROXY",
    "all_proxy",
    # the contract's own names
    "BELVEDIR_API_KEY",
    "BELVEDIR_BASE_URL",
    "BELVEDIR_RUN_ID",
    "BELVEDIR_TASKS_FILE",
    "BELVEDIR_TASK_ATTEMPTS",
    "BELVEDIR_GRADING",
    "belvedir_run_id",
    "FRACTAL_API_KEY",
    "FRACTAL_BASE_URL",
    "FRACTAL_RUN_ID",
    "FRACTAL_TASKS_FILE",
    "FRACTAL_ANYTHING",
    # not valid env names
    "1BAD",
    "BAD-NAME",
    "WITH SPACE",
    "",
    "A=B",
    "ÉTÉ",
]

ACCEPTED_ENV_KEYS = [
    "MODEL",
    "MODEL_API_KEY",
    "MODEL_API_BASE",
    "JUDGE_MODEL",
    "HARBOR_AGENT",
    "HARBOR_N_TASKS",
    "PYTHONPATH",
    "path_extra",
    "MY_HOME_DIR",
    "HTTP_PROXY_HELPER",
    "OPENAI_API_KEY",
    "_PRIVATE",
    "x",
    "BELVEDIR_AGENT_URL",
    "BELVEDIR_AGENT_TOKEN",
    "BELVEDIR_MODEL_PROXY",
]


@pytest.mark.parametrize("key", REFUSED_ENV_KEYS)
def test_env_key_policy_refuses_the_key_and_names_it(key):
    refusal = env_key_refusal(key)
    assert refusal is not None, f"{key!r} should be refused"
    assert (key or "''") in refusal


@pytest.mark.parametrize("key", ACCEPTED_ENV_KEYS)
def test_env_key_policy_accepts_ordinary_names(key):
    assert env_key_refusal(key) is None


@pytest.mark.parametrize("key", [k for k in REFUSED_ENV_KEYS if k])
def test_api_refuses_each_refused_env_key_with_400_naming_it(owner, key):
    response = owner.api.post("/api/v1/harnesses", {**HARNESS, "env": {key: "x"}}, format="json")
    assert response.status_code == 400
    assert key in response.json()["env"][0]


@pytest.mark.parametrize("key", ACCEPTED_ENV_KEYS)
def test_api_accepts_each_ordinary_env_key(owner, key):
    response = owner.api.post("/api/v1/harnesses", {**HARNESS, "env": {key: "x"}}, format="json")
    assert response.status_code == 201, response.json()
    # A secret-looking name (MODEL_API_KEY, BELVEDIR_AGENT_TOKEN) is accepted and shown masked.
    shown = "••••" if is_secret_name(key) else "x"
    assert response.json()["env"] == {key: shown}


@pytest.mark.parametrize("env", [["PATH=/x"], "PATH=/x", {"GOOD": {"nested": 1}}, {"GOOD": True}])
def test_env_that_is_not_an_object_of_strings_is_refused_naming_env(owner, env):
    response = owner.api.post("/api/v1/harnesses", {**HARNESS, "env": env}, format="json")
    assert response.status_code == 400
    assert "env" in response.json()


def test_tasks_of_exactly_512_kb_are_accepted():
    assert policy.validate_tasks("a" * TASKS_MAX_BYTES) == "a" * TASKS_MAX_BYTES


def test_tasks_one_byte_over_512_kb_are_refused_naming_tasks():
    with pytest.raises(DomainError) as error:
        policy.validate_tasks("a" * (TASKS_MAX_BYTES + 1))
    assert error.value.field == "tasks"


def test_tasks_cap_counts_utf8_bytes_not_characters():
    two_byte_chars = "é" * (TASKS_MAX_BYTES // 2)
    assert policy.validate_tasks(two_byte_chars) == two_byte_chars
    with pytest.raises(DomainError):
        policy.validate_tasks(two_byte_chars + "é")


def test_api_accepts_tasks_of_exactly_512_kb_and_refuses_one_byte_more(owner):
    exact = owner.api.post(
        "/api/v1/harnesses", {**HARNESS, "tasks": "a" * TASKS_MAX_BYTES}, format="json"
    )
    assert exact.status_code == 201, exact.json()
    assert len(exact.json()["tasks"]) == TASKS_MAX_BYTES
    over = owner.api.post(
        "/api/v1/harnesses",
        {**HARNESS, "name": "Too big", "tasks": "a" * (TASKS_MAX_BYTES + 1)},
        format="json",
    )
    assert over.status_code == 400
    assert "512 KB" in over.json()["tasks"][0]


ACCEPTED_REPO_URLS = [
    "https://github.com/example/harness.git",
    "https://github.com/example/harness",
    "https://git.example.com:8443/team/sub/harness.git",
    "ssh://git@github.com/example/harness.git",
    "ssh://git@git.example.com:2222/example/harness.git",
    "git://git.example.com/harness.git",
    "git@github.com:example/harness.git",
    "deploy@git.example.com:team/harness",
    "file:///srv/git/harness.git",
    "file:///tmp/harness",
]

REFUSED_REPO_URLS = [
    "http://github.com/example/harness.git",  # plain http
    "ftp://example.com/harness.git",
    "file://relative/harness",  # reads "relative" as a host
    "file://./harness",
    "file:relative/harness",
    "file:///",
    "",
    "   ",
    "https://github.com/example/my harness.git",  # spaces
    "git@github.com:example/my harness.git",
    "https://github.com",  # no repository path
    "github.com/example/harness",  # no scheme
    "/srv/git/harness.git",  # a bare path
    "-oProxyCommand=touch /tmp/pwned",
    "ext::sh -c touch% /tmp/pwned",
    "https://[::1/harness.git",  # not a valid URL at all
]


@pytest.mark.parametrize("url", ACCEPTED_REPO_URLS)
def test_git_repo_urls_are_accepted(url):
    assert policy.validate_repo_url(url) == url


@pytest.mark.parametrize("url", REFUSED_REPO_URLS)
def test_non_git_repo_urls_are_refused_naming_repo_url(url):
    with pytest.raises(DomainError) as error:
        policy.validate_repo_url(url)
    assert error.value.field == "repo_url"


@pytest.mark.parametrize("url", REFUSED_REPO_URLS)
def test_api_refuses_non_git_repo_urls_with_400_naming_repo_url(owner, url):
    response = owner.api.post("/api/v1/harnesses", {**HARNESS, "repo_url": url}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == ["repo_url"]


@pytest.mark.parametrize("ref", ["", "main", "v1.2.3", "release/2026-01", "0a1b2c3d", "feature+x"])
def test_branch_tag_and_commit_refs_are_accepted(ref):
    assert policy.validate_ref(ref) == ref


@pytest.mark.parametrize("ref", ["--upload-pack=x", "a..b", "has space", "semi;colon", "$(id)"])
def test_refs_that_are_not_git_names_are_refused_naming_ref(ref):
    with pytest.raises(DomainError) as error:
        policy.validate_ref(ref)
    assert error.value.field == "ref"


def test_an_env_value_with_an_unpaired_surrogate_is_refused_naming_the_key(owner):
    body = (
        '{"name": "s", "repo_url": "https://example.com/r.git", "run_command": "true", '
        '"env": {"ODD": "\\ud800"}}'
    )
    response = owner.api.generic("POST", "/api/v1/harnesses", body, content_type="application/json")
    assert response.status_code == 400
    assert "ODD" in response.json()["env"][0]
