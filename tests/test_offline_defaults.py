"""`make up` and the tests run one configuration (scripts/offline-defaults.sh, sourced by
scripts/up.sh and scripts/test.sh): where no registry answers, the Harbor export and task
images build FROM the local sandbox image, not a python:3.13-slim no engine here can pull."""

import io
import os
import secrets
import subprocess
from pathlib import Path

import docker
import pytest

pytestmark = pytest.mark.docker
ROOT = Path(__file__).resolve().parents[1]


def export_base(**env: str) -> str:
    """BELVEDIR_EXPORT_BASE_IMAGE as the script leaves it, from `env` alone."""
    clean = {k: v for k, v in os.environ.items() if k != "BELVEDIR_EXPORT_BASE_IMAGE"}
    done = subprocess.run(
        ["bash", "-c", 'source scripts/offline-defaults.sh; echo "${BELVEDIR_EXPORT_BASE_IMAGE-}"'],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def image_labelled():
    """A copy of the sandbox image with the recipe label it is given; removed afterwards."""
    client = docker.from_env()
    made: list[str] = []

    def make(recipe: str) -> str:
        tag = f"belvedir-test-sandbox:{secrets.token_hex(6)}"
        client.images.build(
            fileobj=io.BytesIO(
                f"FROM belvedir-sandbox:latest\nLABEL belvedir.sandbox.recipe={recipe}\n".encode()
            ),
            tag=tag,
            rm=True,
        )
        made.append(tag)
        return tag

    yield make
    for tag in made:
        client.images.remove(tag, force=True)
    client.close()


def test_offline_the_export_builds_from_the_sandbox_image(image_labelled):
    offline = image_labelled("offline")

    assert export_base(BELVEDIR_SANDBOX_IMAGE=offline) == offline


def test_with_a_registry_or_a_choice_of_the_operators_the_default_stays(image_labelled):
    online = image_labelled("dockerfile")

    assert export_base(BELVEDIR_SANDBOX_IMAGE=online) == ""  # settings' python:3.13-slim
    assert export_base(BELVEDIR_EXPORT_BASE_IMAGE="my/base:1") == "my/base:1"


def test_make_up_and_the_tests_source_the_same_defaults():
    for script in ("scripts/up.sh", "scripts/test.sh"):
        assert "source scripts/offline-defaults.sh" in (ROOT / script).read_text(), script
