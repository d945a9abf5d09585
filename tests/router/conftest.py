"""The router's fixtures: a covered model, a covered running run with its key, the local
upstream, and the router served by a real ASGI server (uvicorn) on 127.0.0.1."""

import pytest
from django.db import connection

from models_registry.models import CoveredModel, Lab
from tests.router.fake_upstream import FakeUpstream
from tests.router.helpers import (
    INPUT_PRICE,
    MAX_OUTPUT,
    MODEL,
    OUTPUT_PRICE,
    free_port,
    make_run,
    start_uvicorn,
)


@pytest.fixture
def covered_model(db) -> CoveredModel:
    lab = Lab.objects.create(name="Fake Lab", slug="fakelab", vendor_prefixes="fakelab")
    return CoveredModel.objects.create(
        model_id=MODEL,
        display_name="Fake model",
        lab=lab,
        input_price_micros=INPUT_PRICE,
        output_price_micros=OUTPUT_PRICE,
        max_output_tokens=MAX_OUTPUT,
    )


@pytest.fixture
def covered_run(owner, harness, covered_model):
    return make_run(owner.project, harness, cap_micros=2_000_000)


@pytest.fixture
def upstream(settings):
    with FakeUpstream() as fake:
        settings.BELVEDIR_ROUTER_UPSTREAM_BASE = fake.base_url
        settings.BELVEDIR_ROUTER_UPSTREAM_KEY = "sk-upstream-operator"
        yield fake


@pytest.fixture
def serve_router(transactional_db, upstream, tmp_path):
    """`serve_router(**env)`: the router served by uvicorn on this test's database, with these
    settings; its /api/v1 base URL. Stopped after the test; `serve_router.processes` holds
    them."""
    processes = []

    def serve(**env: str) -> str:
        port = free_port()
        processes.append(
            start_uvicorn(
                upstream_base=upstream.base_url,
                database_name=connection.settings_dict["NAME"],
                port=port,
                log_path=tmp_path / f"uvicorn-{port}.log",
                **env,
            )
        )
        return f"http://127.0.0.1:{port}/api/v1"

    serve.processes = processes
    yield serve
    for process in processes:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture
def router_url(serve_router) -> str:
    return serve_router()
