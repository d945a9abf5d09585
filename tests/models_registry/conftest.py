import pytest


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    """Adapter zips land in this test's own directory (the default storage's MEDIA_ROOT)."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"
