"""An agent that installs itself in each task container (claude-code, ...) runs on an offline
install when every task's image already holds it: the platform's export says so (the
operator's BELVEDIR_EXPORT_BASE_AGENTS, as `[metadata] agents_installed` in each task.toml),
and the Harbor driver reads it before its offline refusal, at the install step (--check) too.
Harbor 0.26 then installs nothing (tests/drivers/test_harbor_claude_code_e2e.py runs it)."""

from pathlib import Path

import pytest

from harnesses import harbor_export
from harnesses.environment_export import tasks_export_files
from harnesses.harbor_export import ExportOptions, export_files, write_directory
from tests.drivers.helpers import ExportServer, free_port  # (puts the drivers on sys.path)
from tests.helpers.harbor import FOUR_KINDS

from belvedir_harbor import agents, dataset, run  # isort: skip


@pytest.fixture
def offline(monkeypatch):
    """npm's registry cannot be reached from here."""
    monkeypatch.setattr(agents, "NPM_REGISTRY_URL", f"http://127.0.0.1:{free_port()}/")


def tasks_holding(root: Path, holds: dict[str, str | None]) -> Path:
    """A dataset of tasks, each task.toml naming the agents its image holds (None: no key)."""
    for name, named in holds.items():
        (root / name).mkdir(parents=True)
        metadata = "" if named is None else f'agents_installed = "{named}"\n'
        (root / name / "task.toml").write_text(f"[metadata]\ntask_id = {name!r}\n{metadata}")
    return root


def test_the_export_names_the_agents_its_base_image_holds_in_every_task_toml(tmp_path):
    options = ExportOptions(base_image="belvedir-claude-code:1", base_agents=("claude-code",))
    write_directory(export_files(FOUR_KINDS, options, judge_source="#"), tmp_path / "held")
    assert dataset.agents_installed(tmp_path / "held") == {"claude-code"}
    plain = export_files(FOUR_KINDS, ExportOptions(), judge_source="#")
    assert not any(b"agents_installed" in f.content for f in plain)
    write_directory(plain, tmp_path / "plain")
    assert dataset.agents_installed(tmp_path / "plain") == frozenset()
    assert harbor_export.AGENTS_INSTALLED == dataset.AGENTS_INSTALLED


def test_the_platforms_export_takes_the_operators_setting(settings):
    settings.BELVEDIR_EXPORT_BASE_IMAGE = "belvedir-claude-code:1"
    settings.BELVEDIR_EXPORT_BASE_AGENTS = ["claude-code"]
    files = {f.path: f.content.decode() for f in tasks_export_files(FOUR_KINDS[:1])}
    assert 'agents_installed = "claude-code"' in files["capital/task.toml"]
    assert files["capital/environment/Dockerfile"].startswith("FROM belvedir-claude-code:1\n")


def test_an_agent_every_task_image_holds_is_not_refused_offline(tmp_path, offline):
    held = tasks_holding(tmp_path / "a", {"sum": "claude-code", "todo": "opencode, claude-code"})
    run.agent_downloads_check({"HARBOR_AGENT": "claude-code"}, held)
    # Held by one task's image only, by none, or no dataset to say: refused as before.
    with pytest.raises(run.Refused, match="HARBOR_AGENT opencode installs itself"):
        run.agent_downloads_check({"HARBOR_AGENT": "opencode"}, held)
    unsaid = tasks_holding(tmp_path / "b", {"sum": "claude-code", "todo": None})
    for where in (unsaid, None, tmp_path / "missing"):
        with pytest.raises(run.Refused, match="HARBOR_AGENT claude-code installs itself"):
            run.agent_downloads_check({"HARBOR_AGENT": "claude-code"}, where)
    (held / "sum" / "task.toml").write_text("[metadata\n")  # does not parse: nothing said
    assert dataset.agents_installed(held) == frozenset()


def test_the_install_step_fetches_the_tasks_field_to_read_what_its_images_hold(
    tmp_path, monkeypatch, offline, capsys
):
    toml = '[metadata]\nagents_installed = "claude-code"\n'
    with ExportServer({"sum/task.toml": toml, "README.md": "x"}) as platform:
        env = {
            "BELVEDIR_BASE_URL": platform.url,
            "BELVEDIR_API_KEY": "bv_run_k",
            "BELVEDIR_RUN_ID": "run_1",
            "BELVEDIR_TASKS_FILE": "/control/tasks.json",
            "HARBOR_AGENT": "claude-code",
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path)
        # Harbor is not installed here: --check says so and passes; nothing was refused.
        assert run.main(["--check"]) == 0
        assert "installs itself" not in capsys.readouterr().err
        monkeypatch.setenv("HARBOR_AGENT", "opencode")
        assert run.main(["--check"]) == 2
        assert "HARBOR_AGENT opencode installs itself" in capsys.readouterr().err
    assert platform.requests == [("/api/v1/runs/run_1/tasks/export", "Bearer bv_run_k")] * 2
