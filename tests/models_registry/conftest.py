import pytest


@pytest.fixture(autouse=True)
def _media_root(media_root):
    """Every test here stores adapter zips in its own directory."""
    return media_root
