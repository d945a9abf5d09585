"""Every available catalog card, exactly as prefilled, run on an offline install (issue 24's
catalog test and its offline fail-fast end to end).

Each card becomes a harness through the API's `{"preset": slug}` (what the New Harness page's
card and `belvedir benchmarks add --preset` post: every field the card's, Tasks included), is
launched with a covered model and no key, and runs through the runs cluster (`manage.py
qcluster`, one worker, on this test's database) under gVisor, in sandboxes on a network with no
egress (tests/helpers/offline_network.py: what a host with no route out gives them, the platform
still reachable through the sandbox gateway). What each card must do follows from the card
itself, so a new card is covered as soon as it is in the catalog:

- a registry dataset (the suites) fails at its install step with the driver's note that registry
  datasets need an online install, before Harbor or any task sandbox starts;
- an agent that installs itself from the internet (openclaw, opencode, pi) fails at its install
  step with the driver's note naming what it needed;
- every other card (the Belvedir Runner, Runner on Harbor) finishes with a score: the model and
  the card's default judge (the platform's, covered) both through the router, the judge giving
  every answer 1, so the score is 1, never "succeeded, 0.000".

A scaffold card with Harbor's oracle for its agent (no download, no model) scores its
prefilled Tasks offline, judged by the card's default judge: the scaffolds are judged cards
(without a judge Harbor refused the run, JUDGE_API_KEY missing for the example's rubric task).

One network, gateway and cluster serve all the cards (module-scoped).
"""

import json
import socket

import docker
import pytest

from billing.models import Kind
from billing.services import ledger_operator_entry
from harbor.models import TaskSandbox
from harnesses.catalog import HARBOR_REPO, PRESETS, preset_get
from runs.models import Run
from runs.results import task_results
from sandboxes.network import host_resolvers
from tests.drivers.helpers import HARBOR  # noqa: F401  (puts the drivers on sys.path)
from tests.helpers.offline_platform import offline_platform
from tests.helpers.run_fixtures import FAKELAB_MODEL, sandbox_ports
from tests.helpers.scripted_model import ScriptedModel
from tests.runs.helpers import containers_of, wait_for

from belvedir_harbor import agents, run as harbor_run  # isort: skip

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

COVERED = FAKELAB_MODEL
VERDICT = '{"score": 1, "reason": "fine"}'  # every reply: the agent's answer and the judge's
AVAILABLE = [p for p in PRESETS if p.available]
INSTALL_FAILED = "belvedir: the install command exited with code 2."
DRIVER_SAID = "belvedir: the harness-harbor driver said: "


def expected(preset) -> str:
    """What the card does offline: `registry`, `download` or `score` (see the module)."""
    dataset = preset.env.get("HARBOR_DATASET", "").strip()
    if dataset and harbor_run.dataset_kind(dataset) == "registry":
        return "registry"
    if preset.env.get("HARBOR_AGENT", "").strip() in agents.DOWNLOADED_AGENTS:
        return "download"
    return "score"


@pytest.fixture(scope="module")
def offline_install(offline_network, live_server, django_db_setup, tmp_path_factory):
    """The platform at the live server with its sandboxes on the offline network
    (tests/helpers/offline_platform.py), exports built FROM the sandbox image. Yields the
    runs cluster's log."""
    tmp = tmp_path_factory.mktemp("catalog")
    with offline_platform(
        offline_network,
        live_server,
        tmp / "qcluster.log",
        BELVEDIR_CACHE_DIR=str(tmp / "cache"),
        BELVEDIR_EXPORT_BASE_IMAGE="belvedir-sandbox:latest",
    ) as log:
        yield log


def test_a_sandbox_on_the_offline_network_reaches_the_platform_and_nothing_else(
    offline_network,
    tmp_path,
):
    """The boundary the catalog test relies on, tried from inside: on the egress-off network a
    gVisor sandbox connects to a port of the gateway IP's range, but DNS to the host's own
    nameservers (let through on the default network) is refused at once, and no name resolves.
    """
    listener = socket.create_server((offline_network.gateway, sandbox_ports()[0]))
    port = listener.getsockname()[1]
    servers = host_resolvers()
    # The host's nameservers as the sandbox's own resolv.conf, as the Docker backend gives it.
    resolv_conf = tmp_path / "resolv.conf"
    resolv_conf.write_text("".join(f"nameserver {server}\n" for server in servers))
    resolv_conf.chmod(0o644)
    probe = (
        "import socket\n"
        f"socket.create_connection(({offline_network.gateway!r}, {port}), timeout=5).close()\n"
        "print('gateway: reached')\n"
        "for server in " + repr(list(servers)) + ":\n"
        "    try:\n"
        "        socket.create_connection((server, 53), timeout=5).close()\n"
        "        print('dns: reached', server)\n"
        "    except OSError as exc:\n"
        "        print('dns: refused' if isinstance(exc, ConnectionRefusedError) else exc)\n"
        "try:\n"
        "    socket.getaddrinfo('registry.npmjs.org', 443)\n"
        "    print('name: resolved')\n"
        "except OSError:\n"
        "    print('name: unresolved')\n"
    )
    client = docker.from_env()
    try:
        output = client.containers.run(
            "belvedir-sandbox:latest",
            ["python3", "-c", probe],
            network=offline_network.name,
            runtime="runsc",
            volumes={str(resolv_conf): {"bind": "/etc/resolv.conf", "mode": "ro"}},
            remove=True,
        ).decode()
    finally:
        client.close()
        listener.close()
    lines = output.strip().splitlines()
    assert lines[0] == "gateway: reached", output
    assert lines[1:-1] == ["dns: refused"] * len(servers), output
    assert lines[-1] == "name: unresolved", output


def add_and_run(
    owner, settings, worker_log, slug: str, launch: dict, env_changes: dict | None = None
) -> tuple[Run, int]:
    """POST the card `{"preset": slug}` to the API as the catalog does (with `env_changes`
    over its prefilled env, if any), launch it with `launch`, and wait for the runs cluster to
    end the run: (the run, how many model calls reached the router's upstream, which answers
    every call with VERDICT)."""
    ledger_operator_entry(
        organization=owner.org, kind=Kind.CREDIT, amount_micros=5_000_000, note="catalog"
    )
    with ScriptedModel([VERDICT]) as model:
        settings.BELVEDIR_ROUTER_UPSTREAM_BASE = model.base_url
        settings.BELVEDIR_ROUTER_UPSTREAM_KEY = "sk-upstream-operator"
        settings.BELVEDIR_DEFAULT_JUDGE_MODEL = COVERED  # what the judged cards prefill
        preset = preset_get(slug)
        card = {"preset": slug}
        if env_changes:
            card["env"] = {**preset.prefilled_env(), **env_changes}
        made = owner.api.post("/api/v1/harnesses", card, format="json")
        assert made.status_code == 201, made.json()
        harness = made.json()
        assert harness["tasks"] == preset.tasks
        assert harness["env"] == {**preset.prefilled_env(), **(env_changes or {})}
        launched = owner.api.post(
            "/api/v1/runs", {"harness": harness["id"], **launch}, format="json"
        )
        assert launched.status_code == 201, launched.json()
        run_id = launched.json()["id"]
        wait_for(
            lambda: Run.objects.get(pk=run_id).status in ("succeeded", "failed", "cancelled"),
            600,
            f"the {slug} run to end",
            on_timeout=worker_log.read_text,
        )
        calls = len(model.requests)
    return Run.objects.get(pk=run_id), calls


@pytest.mark.parametrize("preset", AVAILABLE, ids=lambda p: p.slug)
def test_every_available_card_as_prefilled_scores_or_fails_fast_saying_what_it_needs_offline(
    preset, offline_install, owner, settings, fakelab_model
):
    run, calls = add_and_run(owner, settings, offline_install, preset.slug, {"model": COVERED})
    outcome = expected(preset)
    if outcome == "score":
        assert run.status == "succeeded", (run.notes, run.log_tail)
        assert run.score == 1.0, run.results
        # The card's own Tasks ran, each scored.
        scored = task_results(run.results)
        assert scored == {task["id"]: 1.0 for task in json.loads(preset.tasks)}, run.results
        assert run.model_covered and run.judge_covered
        assert calls >= 2  # the agent's answer and the judge's verdict, through the router
        if preset.repo == HARBOR_REPO:  # each task in a task sandbox, stopped with the run
            sandboxes = TaskSandbox.objects.filter(run=run)
            assert sandboxes.count() == len(scored)
            assert {s.status for s in sandboxes} == {"stopped"}
            assert run.results["dataset"] == "tasks"  # the Tasks field, no HARBOR_DATASET
    else:
        assert run.status == "failed" and run.score is None, (run.notes, run.log_tail)
        assert run.notes[0] == INSTALL_FAILED, run.notes
        note = run.notes[1]
        assert note.startswith(DRIVER_SAID), run.notes
        if outcome == "registry":
            assert "registry datasets need an online install" in note, note
            assert preset.env["HARBOR_DATASET"] in note
        else:
            agent = preset.env["HARBOR_AGENT"]
            assert f"HARBOR_AGENT {agent} installs itself in each task container" in note
            assert agents.DOWNLOADED_AGENTS[agent] in note
            assert f"{agents.NPM_REGISTRY_URL} cannot be reached from here" in note
        assert not TaskSandbox.objects.filter(run=run).exists()  # stopped before Harbor ran
        assert calls == 0  # no model was called
    wait_for(lambda: containers_of(run.pk) == [], 30, "the run's containers to be removed")


def test_the_catalog_test_knows_every_kind_of_available_card():
    """Each available card falls in one of the three outcomes, and each outcome has a card."""
    kinds = {p.slug: expected(p) for p in AVAILABLE}
    assert set(kinds.values()) == {"registry", "download", "score"}, kinds


SCAFFOLD_CARDS = [p for p in AVAILABLE if expected(p) == "download"]


def test_a_scaffold_card_with_harbors_oracle_for_its_agent_scores_its_prefilled_tasks(
    offline_install, owner, settings, fakelab_model
):
    """The scaffold cards differ only in HARBOR_AGENT, so one stands for all: with the agent
    swapped for Harbor's oracle (which needs no download and calls no model) the card's own
    Tasks run offline, judged by the platform's default judge through the router, and score."""
    shapes = {
        json.dumps({**p.as_dict(), "env": {}, "slug": "", "name": "", "description": ""})
        for p in SCAFFOLD_CARDS
    }
    assert len(shapes) == 1 and {p.env["HARBOR_AGENT"] for p in SCAFFOLD_CARDS} == set(
        agents.OPENAI_COMPATIBLE_AGENTS
    )
    preset = SCAFFOLD_CARDS[0]
    run, calls = add_and_run(
        owner, settings, offline_install, preset.slug, {}, {"HARBOR_AGENT": "oracle"}
    )
    assert run.status == "succeeded", (run.notes, run.log_tail)
    assert run.score == 1.0 and run.results["agent"] == "oracle", run.results
    assert task_results(run.results) == {t["id"]: 1.0 for t in json.loads(preset.tasks)}
    assert run.judge_covered and not run.model_covered
    assert calls == 1  # the judge's verdict only: the oracle calls no model
