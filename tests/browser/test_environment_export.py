"""The environment page's "Export for Harbor" in a real browser: the click downloads a zip of
Harbor task directories, the first N tasks when a number is given."""

import io
import zipfile

import pytest

from harnesses.environments import environment_create
from tests.helpers.harbor import FOUR_KINDS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_export_for_harbor_downloads_the_zip(signed_in_page, owner, tmp_path):
    environment = environment_create(
        project=owner.project, created_by=owner.user, name="Four kinds", tasks=FOUR_KINDS
    )
    page = signed_in_page
    page.goto(f"/environments/{environment.pk}/")
    form = page.locator("#export-harbor")
    form.locator("input[name=limit]").fill("2")
    with page.expect_download() as download_info:
        form.get_by_role("button", name="Export for Harbor").click()
    download = download_info.value
    assert download.suggested_filename == "Four-kinds-v1.zip"
    download.save_as(tmp_path / "env.zip")
    names = zipfile.ZipFile(io.BytesIO((tmp_path / "env.zip").read_bytes())).namelist()
    assert {name.split("/")[1] for name in names if name.count("/") > 1} == {"capital", "refund"}
    assert "Four-kinds-v1/refund/tests/judge.py" in names
