"""The Harbor export as a streamed zip, from the API (GET /api/v1/environments/{id}/export) and
the environment page's "Export for Harbor": any member may download it (it is a read),
outsiders get 404, a bad limit is a 400 naming `limit`. What a run's own key may export:
tests/runs/test_run_key_export.py."""

import io
import json
import tomllib
import zipfile

import pytest

from harnesses.environments import environment_create, environment_update
from tests.helpers.harbor import FOUR_KINDS

pytestmark = pytest.mark.django_db


@pytest.fixture
def environment(owner):
    return environment_create(
        project=owner.project, created_by=owner.user, name="Support desk", tasks=FOUR_KINDS
    )


def download(tenant, environment, query=""):
    return tenant.api.get(f"/api/v1/environments/{environment.pk}/export{query}")


def archive_of(response) -> zipfile.ZipFile:
    assert response.status_code == 200, response.content[:500]
    assert response.streaming
    return zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))


def test_the_export_is_a_zip_of_one_harbor_task_directory_per_task(owner, environment):
    response = download(owner, environment)
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="Support-desk-v1.zip"'
    archive = archive_of(response)
    names = set(archive.namelist())
    for task in ("capital", "refund", "sum", "todo"):
        for path in ("instruction.md", "task.toml", "environment/Dockerfile", "tests/test.sh"):
            assert f"Support-desk-v1/{task}/{path}" in names
        solve = archive.getinfo(f"Support-desk-v1/{task}/solution/solve.sh")
        assert (solve.external_attr >> 16) & 0o111
    config = tomllib.loads(archive.read("Support-desk-v1/refund/task.toml").decode())
    assert config["metadata"]["environment"] == environment.pk
    assert config["metadata"]["environment_version"] == 1
    assert config["verifier"]["env"]["JUDGE_API_KEY"] == "${JUDGE_API_KEY}"
    task = json.loads(archive.read("Support-desk-v1/sum/tests/task.json"))
    assert task["verifier"]["source"] == FOUR_KINDS[2]["verifier"]["source"]


def test_the_base_image_is_a_setting(owner, environment, settings):
    settings.BELVEDIR_EXPORT_BASE_IMAGE = "belvedir-sandbox:latest"
    archive = archive_of(download(owner, environment))
    dockerfile = archive.read("Support-desk-v1/capital/environment/Dockerfile").decode()
    assert dockerfile.startswith("FROM belvedir-sandbox:latest\n")


def test_limit_keeps_the_first_tasks_of_the_current_version(owner, environment):
    environment_update(environment=environment, updated_by=owner.user, tasks=FOUR_KINDS[1:])
    archive = archive_of(download(owner, environment, "?limit=2"))
    tasks = {name.split("/")[1] for name in archive.namelist() if name.count("/") > 1}
    assert tasks == {"refund", "sum"}
    assert "Support-desk-v2/README.md" in archive.namelist()


@pytest.mark.parametrize("limit", ["0", "two", "-3"])
def test_a_bad_limit_is_refused_naming_the_field(owner, environment, limit):
    response = download(owner, environment, f"?limit={limit}")
    assert response.status_code == 400
    assert "limit" in response.json()


def test_a_read_only_member_may_download_and_an_outsider_gets_404(readonly, outsider, environment):
    assert download(readonly, environment).status_code == 200
    assert download(outsider, environment).status_code == 404
    assert outsider.api.get("/api/v1/environments/env_nope/export").status_code == 404


def test_the_environment_page_offers_the_export_and_serves_the_zip(owner, environment):
    page = owner.web.get(f"/environments/{environment.pk}/").content.decode()
    assert f'action="/environments/{environment.pk}/export/"' in page
    assert "Export for Harbor" in page
    response = owner.web.get(f"/environments/{environment.pk}/export/", {"limit": "1"})
    names = archive_of(response).namelist()
    assert "Support-desk-v1/capital/task.toml" in names
    assert not any("/refund/" in name for name in names)
    everything = archive_of(owner.web.get(f"/environments/{environment.pk}/export/?limit="))
    assert "Support-desk-v1/todo/solution/solve.sh" in everything.namelist()


def test_the_page_download_is_scoped_like_the_page(readonly, outsider, environment):
    url = f"/environments/{environment.pk}/export/"
    assert readonly.web.get(url).status_code == 200
    assert outsider.web.get(url).status_code == 404
    bad = readonly.web.get(url, {"limit": "none"})
    assert bad.status_code == 400 and "limit must be a whole number" in bad.content.decode()
