"""The sandbox interface stays backend- and Django-free; settings reach it in one place."""

import subprocess
import sys
from pathlib import Path

import pytest

from belvedir.sandbox_config import get_backend, spec_from_settings
from runs import contract, executor
from sandboxes import entrypoint
from sandboxes.base import SandboxError, SandboxSpec
from sandboxes.docker import DockerBackend

ROOT = Path(__file__).resolve().parents[2]


def test_every_sandbox_module_imports_without_django_or_the_platform():
    modules = sorted(
        f"sandboxes.{path.stem}"
        for path in (ROOT / "sandboxes").glob("*.py")
        if path.stem != "__init__"
    )
    assert "sandboxes.network" in modules and "sandboxes.docker" in modules
    code = (
        f"import importlib, sys; [importlib.import_module(m) for m in {modules!r}]; "
        "import belvedir.git; "  # the git wrapper is pure too: only itself of the platform
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'belvedir') "
        "and m not in ('belvedir', 'belvedir.git')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_the_import_contract_forbids_django_and_the_platform_in_runs_sandbox():
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (pure,) = [c for c in contracts["contracts"] if c["id"] == "sandbox-pure"]
    assert pure["type"] == "forbidden" and pure["source_modules"] == ["sandboxes"]
    assert {"django"} | _apps() <= set(pure["forbidden_modules"])


def test_a_spec_takes_its_limits_image_and_runtime_from_settings(settings):
    settings.BELVEDIR_SANDBOX_IMAGE = "sandbox:test"
    settings.BELVEDIR_SANDBOX_NETWORK = "sandboxes-test"
    settings.BELVEDIR_SANDBOX_HOST_NETWORK = False
    settings.BELVEDIR_SANDBOX_CPUS = 0.5
    settings.BELVEDIR_SANDBOX_MEMORY = "512m"
    settings.BELVEDIR_SANDBOX_PIDS = 64
    settings.BELVEDIR_SANDBOX_RUNTIME = "runsc"
    settings.BELVEDIR_SANDBOX_DISK = 10 << 30
    spec = spec_from_settings(run_id="run_x", command=["true"], cpus=0.25)
    assert spec == SandboxSpec(
        run_id="run_x",
        image="sandbox:test",
        command=["true"],
        network="sandboxes-test",
        cpus=0.25,  # a field given wins over the setting
        memory="512m",
        pids=64,
        runtime="runsc",
        disk_bytes=10 << 30,
    )
    settings.BELVEDIR_SANDBOX_DISK = 0
    settings.BELVEDIR_SANDBOX_RUNTIME = ""
    settings.BELVEDIR_SANDBOX_HOST_NETWORK = True
    spec = spec_from_settings(run_id="run_x", command=["true"])
    assert spec.disk_bytes is None and spec.runtime == "" and spec.network == "host"


def test_the_configured_backend_is_built_from_settings(settings, db):
    settings.BELVEDIR_SANDBOX_CA_MOUNT = "/etc/ssl/certs/ca-certificates.crt"
    settings.BELVEDIR_INSTANCE = "platform-a"
    backend = get_backend()
    assert isinstance(backend, DockerBackend)
    assert backend.ca_bundle_mount == "/etc/ssl/certs/ca-certificates.crt"
    assert backend.instance == "platform-a"
    settings.BELVEDIR_SANDBOX_BACKEND = "kubernetes"
    with pytest.raises(SandboxError, match="unknown sandbox backend 'kubernetes'"):
        get_backend()


def test_the_entrypoint_and_the_executor_agree_on_the_stage_markers():
    assert contract.stage_marker("k3y", "tasks") != contract.stage_marker("other", "tasks")
    assert contract.stage_marker("k3y", "tasks") != contract.stage_marker("k3y", "install")
    assert entrypoint.STAGE_FILE == contract.STAGE_FILE
    assert entrypoint.STAGE_KEY_FILE == contract.STAGE_KEY_FILE
    assert entrypoint.REPO_DIR == contract.REPO_DIR
    assert entrypoint.RESULTS_FILE == executor.RESULTS_FILE
    assert contract.COMMAND[-1] == contract.ENTRYPOINT_FILE


def _apps() -> set[str]:
    """Every app, as the floors contract in pyproject.toml stands them."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = (c["layers"] for c in contracts["contracts"] if c["type"] == "layers")
    return {app.strip() for layer in layers for app in layer.split("|")}


APPS = sorted(_apps())


def _docker_imports(package: Path) -> list[str]:
    """Every `import docker…` / `from docker… import` in a package's modules."""
    import ast

    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} {name}"
                for name in names
                if name == "docker" or name.startswith("docker.")
            ]
    return found


def test_nothing_outside_sandboxes_imports_docker():
    assert [hit for app in APPS for hit in _docker_imports(ROOT / app)] == []
    assert _docker_imports(ROOT / "sandboxes")  # the one place that does


def test_the_import_contract_forbids_docker_in_every_app():
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (rule,) = [c for c in contracts["contracts"] if c["id"] == "docker-in-sandboxes"]
    assert rule["type"] == "forbidden" and rule["forbidden_modules"] == ["docker"]
    assert set(rule["source_modules"]) == set(APPS)
    assert "sandboxes" not in rule["source_modules"]


def test_the_gateway_command_asks_the_backend_whose_an_address_is(settings):
    from runs.management.commands.sandbox_gateway import tenants
    from sandboxes import warm
    from sandboxes.gateway_tenants import DockerTenants, MappedTenants

    settings.BELVEDIR_SANDBOX_HOST_NETWORK = False
    found = tenants()
    assert isinstance(found, DockerTenants)
    assert found.network == settings.BELVEDIR_SANDBOX_NETWORK
    assert found.warm_dir == Path(settings.BELVEDIR_SANDBOX_DATA_DIR) / warm.POOL_DIR
    settings.BELVEDIR_SANDBOX_HOST_NETWORK = True
    assert isinstance(tenants(), MappedTenants)


def test_no_sandbox_module_is_over_500_lines():
    long = {
        path.name: lines
        for path in sorted((ROOT / "sandboxes").glob("*.py"))
        if (lines := len(path.read_text().splitlines())) > 500
    }
    assert long == {}
