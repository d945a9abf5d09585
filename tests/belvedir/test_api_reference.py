"""The API reference: every endpoint documented, no schema warnings, and a generated client works."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver
from openapi_spec_validator import validate
from rest_framework.test import APIClient

from runs.models import Run
from tests.runs.helpers import EXAMPLES, git_repo_of

VENV_BIN = Path(sys.executable).parent


def _schema(tmp_path: Path) -> dict:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    return yaml.safe_load(out.read_text())


def _api_routes() -> list[str]:
    """Every path under /api/v1/, in OpenAPI form (`/api/v1/runs/{run_id}`)."""

    def walk(patterns, prefix: str):
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern) and route.startswith("api/v1/"):
                yield "/" + route.replace("<str:", "{").replace(">", "}")

    return sorted(set(walk(get_resolver().url_patterns, "")))


@pytest.fixture(scope="module")
def schema(tmp_path_factory) -> dict:
    return _schema(tmp_path_factory.mktemp("schema"))


def test_the_schema_generates_without_a_single_warning_and_is_valid_openapi(schema):
    # `--fail-on-warn` raised inside _schema had there been any warning.
    validate(schema)
    assert schema["openapi"].startswith("3.")


# The router's answer to any path under /api/v1 nothing else serves (a 404, or passed through
# when the operator allows it: docs/models.md), not an endpoint of its own.
ROUTER_CATCH_ALL = "/api/v1/<path:rest}"


def test_every_api_route_is_documented(schema):
    routes = _api_routes()
    assert ROUTER_CATCH_ALL in routes
    routes.remove(ROUTER_CATCH_ALL)
    assert "/api/v1/traces" in routes and "/api/v1/outcomes" in routes
    assert sorted(schema["paths"]) == routes


def test_every_operation_has_a_summary_an_id_and_its_error_answers(schema):
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            assert operation.get("summary", "").endswith("."), where
            assert "\n" not in operation["summary"], where
            assert operation.get("operationId"), where
            statuses = set(operation["responses"])
            assert any(s.startswith("2") for s in statuses), where
            if operation.get("security"):  # a signed link (the adapter download) needs no key
                assert "401" in statuses, where
            if "{" in path:
                assert "404" in statuses, where
            if method in ("post", "put", "patch") and operation.get("requestBody"):
                assert "400" in statuses, where


def test_errors_are_shared_components_in_the_shapes_the_api_answers(schema):
    components = schema["components"]["schemas"]
    assert components["Error"]["required"] == ["code", "detail"]
    assert components["InvalidInput"]["additionalProperties"] == {
        "type": "array",
        "items": {"type": "string"},
    }
    launch = schema["paths"]["/api/v1/runs"]["post"]["responses"]
    ref = "#/components/schemas/"
    assert launch["400"]["content"]["application/json"]["schema"]["$ref"] == ref + "InvalidInput"
    # 402: a priced launch the balance cannot pay; 503: the sandbox engine is not answering.
    for status in ("401", "402", "403", "404", "429", "503"):
        assert launch[status]["content"]["application/json"]["schema"]["$ref"] == ref + "Error"


def test_list_endpoints_document_their_page_and_filters(schema):
    runs = schema["paths"]["/api/v1/runs"]["get"]
    names = {p["name"] for p in runs["parameters"]}
    assert {"limit", "offset", "harness", "status", "model"} <= names
    page = runs["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert page == "#/components/schemas/PaginatedRunList"
    for path in ("/api/v1/harnesses", "/api/v1/keys", "/api/v1/sessions", "/api/v1/task-groups"):
        body = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
        assert body["schema"]["$ref"].startswith("#/components/schemas/Paginated"), path


def test_the_trace_endpoint_documents_both_otlp_encodings_and_answers_in_kind(schema):
    ingest = schema["paths"]["/api/v1/traces"]["post"]
    body = ingest["requestBody"]["content"]
    assert body["application/json"]["schema"]["$ref"].endswith("OtlpExportTraceServiceRequest")
    assert body["application/x-protobuf"]["schema"] == {"type": "string", "format": "binary"}
    assert set(ingest["responses"]["200"]["content"]) == set(body)
    assert {"400", "401", "413", "415", "503"} <= set(ingest["responses"])
    assert ingest["security"] == [{"ApiKey": []}, {"RunKey": []}]
    outcome = schema["paths"]["/api/v1/outcomes"]["post"]
    request = outcome["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert schema["components"]["schemas"][request.rsplit("/", 1)[1]]["required"] == [
        "session_id",
        "outcome",
    ]


def test_the_schema_and_the_docs_pages_are_served(owner):
    schema = owner.web.get("/api/schema/?format=json")
    assert schema.status_code == 200
    assert "/api/v1/traces" in json.loads(schema.content)["paths"]
    docs = owner.web.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content


def test_the_outcomes_endpoint_answers_errors_in_the_documented_shapes(owner):
    anonymous = APIClient().post("/api/v1/outcomes", {}, format="json")
    assert anonymous.status_code == 401
    assert anonymous.json() == {
        "detail": "Unknown or revoked API key.",
        "code": "not_authenticated",
    }

    keyed = APIClient()
    keyed.credentials(HTTP_AUTHORIZATION=f"Bearer {owner.key}")
    not_json = keyed.post("/api/v1/outcomes", b"{", content_type="application/json")
    assert not_json.status_code == 400
    assert not_json.json() == {"detail": "The body must be JSON.", "code": "invalid"}
    unknown = keyed.post(
        "/api/v1/outcomes", {"session_id": "nope", "outcome": "success"}, format="json"
    )
    assert unknown.status_code == 404
    assert unknown.json() == {"session_id": ["No session with this id in the project."]}


# --- a client generated from the schema -----------------------------------------------------

CLIENT_SCRIPT = textwrap.dedent(
    """
    import json, sys

    from belvedir_client import AuthenticatedClient
    from belvedir_client.api.harnesses import harnesses_create
    from belvedir_client.api.runs import runs_launch, runs_list, runs_read
    from belvedir_client.models import HarnessInputRequest, RunLaunchRequest

    base_url, key, repo_url = sys.argv[1:]
    client = AuthenticatedClient(base_url=base_url, token=key)
    harness = harnesses_create.sync(
        client=client,
        body=HarnessInputRequest(
            name="generated client", repo_url=repo_url, run_command="python3 run.py"
        ),
    )
    launched = runs_launch.sync(
        client=client, body=RunLaunchRequest(
            harness=harness.id, model="openai/gpt-4.1-mini", model_api_key="sk-own-key"
        )
    )
    read = runs_read.sync(client=client, run_id=launched.id)
    listed = runs_list.sync(client=client, harness=harness.id)
    print(json.dumps({
        "harness": harness.id,
        "launched": launched.id,
        "read": [read.id, read.status.value, read.model, read.harness],
        "listed": [listed.count, [run.id for run in listed.results]],
    }))
    """
)


@pytest.mark.docker
@pytest.mark.django_db(transaction=True)
def test_a_client_generated_from_the_schema_registers_a_harness_launches_a_run_and_reads_it(
    live_server, owner, tmp_path, settings
):
    settings.BELVEDIR_FILE_REPO_ROOT = str(tmp_path)
    schema_file = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(schema_file))
    config = tmp_path / "config.yaml"
    config.write_text(
        "package_name_override: belvedir_client\n"
        "content_type_overrides:\n  application/x-protobuf: application/octet-stream\n"
        "  application/zip: application/octet-stream\n"
        "  application/x-tar: application/octet-stream\n"
        "  application/x-ndjson: text/plain\n"
    )
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    generated = subprocess.run(
        [str(VENV_BIN / "openapi-python-client"), "generate", "--path", str(schema_file)]
        + ["--meta", "none", "--config", str(config)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert "Warning" not in generated.stdout + generated.stderr, generated.stdout
    repo_url = git_repo_of(EXAMPLES / "contract-harness", tmp_path / "repo")

    used = subprocess.run(
        [sys.executable, "-c", CLIENT_SCRIPT, live_server.url, owner.key, repo_url],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert used.returncode == 0, used.stderr
    answer = json.loads(used.stdout)
    run = Run.objects.get(pk=answer["launched"])
    assert answer["read"] == [run.pk, "queued", "openai/gpt-4.1-mini", answer["harness"]]
    assert answer["listed"] == [1, [run.pk]]
    assert run.project == owner.project and run.harness.repo_url == repo_url
    assert run.status == "queued" and run.started_at is None  # no worker: nothing ran it
