"""Launch refusals about the repo URL itself: file:// repos outside development, credentials."""

import pytest

from harnesses.models import Harness


@pytest.mark.docker
def test_file_repos_are_refused_at_launch_outside_development_without_a_root(
    owner, make_harness, settings
):
    harness = make_harness(name="local")  # a file:// repo, saved under BELVEDIR_DEV=1
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_FILE_REPO_ROOT = ""
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 400
    assert "repo_url: file:// repositories are not allowed" in response.json()["harness"][0]
    created = owner.api.post(
        "/api/v1/harnesses",
        {"name": "x", "repo_url": "file:///srv/repo", "run_command": "true"},
        format="json",
    )
    assert created.status_code == 400 and "not allowed" in created.json()["repo_url"][0]


@pytest.mark.docker
def test_file_repos_under_the_operator_root_launch_and_others_are_refused(
    owner, make_harness, settings, tmp_path, django_capture_on_commit_callbacks
):
    harness = make_harness(name="local")  # its repo lives under tmp_path
    settings.BELVEDIR_DEV = False
    settings.BELVEDIR_FILE_REPO_ROOT = str(tmp_path)
    with django_capture_on_commit_callbacks(execute=False):
        response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 201, response.json()
    settings.BELVEDIR_FILE_REPO_ROOT = str(tmp_path / "elsewhere")
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 400
    assert f"must be under {tmp_path / 'elsewhere'}" in response.json()["harness"][0]
    for outside in [f"file://{tmp_path}/elsewhere/../../x", "file:///etc", f"file://{tmp_path}x"]:
        created = owner.api.post(
            "/api/v1/harnesses",
            {"name": "y", "repo_url": outside, "run_command": "true"},
            format="json",
        )
        assert created.status_code == 400, outside
        assert "must be under" in created.json()["repo_url"][0]


def test_credentials_in_a_repo_url_never_reach_the_refusal_message():
    from belvedir.git import error_reason, without_credentials

    assert (
        without_credentials("https://bob:s3cret@example.com/x.git")
        == "https://***@example.com/x.git"
    )
    stderr = "fatal: repository 'https://bob:s3cret@example.com/x.git/' not found\n"
    assert "s3cret" not in error_reason(stderr)


@pytest.mark.docker
def test_a_refused_launch_does_not_echo_the_repo_password(owner, make_harness, settings):
    settings.BELVEDIR_GIT_TIMEOUT = 3
    harness = make_harness(name="creds")
    Harness.objects.filter(pk=harness.pk).update(
        repo_url="https://bob:s3cret@nonexistent.invalid/x.git"
    )
    response = owner.api.post("/api/v1/runs", {"harness": harness.pk}, format="json")
    assert response.status_code == 400
    assert (
        "s3cret" not in response.content.decode()
        and "***@nonexistent.invalid" in response.content.decode()
    )
