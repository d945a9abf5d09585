"""Task image builds whose RUN steps run in containers made like task sandboxes (gVisor),
the rest of the Dockerfile by the engine's builder (`sandboxes.taskbuild`): the image
comes out as `docker build` makes it, a failed step says which and why, and what cannot be
built that way is refused before any code runs."""

import contextlib
import dataclasses
import secrets
import socket
import threading
import time

import docker
import pytest

from sandboxes import dockerfile, taskbuild, taskpolicy
from sandboxes.tasks import LABEL_TASK_IMAGE, BuildFailed, ensure_image
from tests.helpers.task_sandboxes import BASE_IMAGE, context_tar, remove_task_images

LIMITS = taskbuild.Limits(
    network="none",
    memory=2**30,
    cpus=1.0,
    pids=256,
    runtime="runsc",
    cap_add=("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"),
    labels={"belvedir.test": "task-build"},
)
POLICY = taskpolicy.Policy(bases=(BASE_IMAGE,), organization="org_test")
MULTI_STAGE = f"""# escape=\\
ARG BASE={BASE_IMAGE}
FROM ${{BASE}} AS base
USER root
ARG GREETING=hello
ENV WHO=world
WORKDIR /app
COPY data.txt ./
RUN cat /proc/version > /app/version && \\
    echo "$GREETING $WHO" > /app/greeting && id -u > /app/uid
RUN cat /app/data.txt > /app/copy-of-data; echo gone > /tmp/t
RUN test ! -e /tmp/t && echo "gVisor's /tmp" > /app/tmp-note
FROM {BASE_IMAGE}
COPY --from=base /app /copied
USER root
RUN ["sh", "-c", "cat /copied/uid > /copied/exec-form"]
USER 1000:1000
CMD ["python3", "-V"]
"""


@pytest.fixture
def client(tmp_path):
    """The engine, with the tags a test built (removed afterwards) and a folder for contexts."""
    made: set[str] = set()
    engine = docker.from_env()
    engine.made, engine.tmp = made, tmp_path
    yield engine
    remove_task_images(made)
    engine.close()


def build(client, dockerfile: str, files: dict[str, str] | None = None, timeout=300, policy=POLICY):
    tag = f"belvedir-task:build-{secrets.token_hex(6)}"
    client.made.add(tag)
    path = client.tmp / f"{tag.replace(':', '-')}.tar.gz"
    path.write_bytes(context_tar(dockerfile, files))
    ensure_image(client, context=path, tag=tag, timeout=timeout, steps=LIMITS, policy=policy)
    return tag


def run(client, tag: str, script: str) -> str:
    return client.containers.run(
        tag, ["sh", "-c", script], remove=True, network_mode="none"
    ).decode()


@pytest.mark.docker
def test_a_multi_stage_build_comes_out_as_docker_build_makes_it(client):
    tag = build(
        client,
        MULTI_STAGE,
        {"data.txt": "data\n", ".dockerignore": "secret.txt\n", "secret.txt": "s"},
    )

    out = run(
        client,
        tag,
        "cd /copied && cat version greeting uid copy-of-data tmp-note exec-form; id -u; "
        "env | grep -c -E '^(GREETING|BASE)='; "
        "for f in secret.txt .dockerignore .belvedir-build data.txt; do "
        "test -e $f && echo has $f; done",
    )

    lines = out.splitlines()
    assert lines[0].startswith("Linux version 4.4.0")  # the RUN ran under gVisor
    assert lines[1:6] == ["hello world", "0", "data", "gVisor's /tmp", "0"]
    assert lines[6:8] == ["1000", "0"]  # the last USER; the build args not kept in the env
    assert lines[8:] == ["has data.txt"]  # .dockerignore honoured, the pieces left out
    config = client.api.inspect_image(tag)["Config"]
    assert config["Cmd"] == ["python3", "-V"] and config["User"] == "1000:1000"
    assert config["WorkingDir"] == "/workspace"  # the second stage's, from its base
    assert config["Labels"][LABEL_TASK_IMAGE] == "1"
    assert config["Labels"]["belvedir.test"] == ""  # the RUN containers' labels stay out
    assert config["Labels"]["belvedir.organization"] == "org_test"
    assert not [i for i in client.images.list() if any("belvedir-task-stage" in t for t in i.tags)]


@pytest.mark.docker
def test_a_run_step_however_it_is_spaced_runs_under_gvisor_never_by_the_engine(client):
    dockerfile = (
        f"FROM {BASE_IMAGE}\nUSER root\nRUN\tcat /proc/version > /tab\n"
        "run  cat /proc/version > /lower\n"
    )

    out = run(client, build(client, dockerfile), "cat /tab /lower")

    assert out.splitlines()[0].startswith("Linux version 4.4.0")  # gVisor's, not the host's
    assert out.splitlines()[1].startswith("Linux version 4.4.0")


@pytest.mark.docker
def test_an_add_of_a_plain_file_is_copied_and_the_engine_unpacks_nothing(client):
    files = {"notes.txt": "hello"}

    tag = build(client, f"FROM {BASE_IMAGE}\nADD notes.txt ./n/\nADD ./notes.txt /m\n", files)

    assert run(client, tag, "cat /workspace/n/notes.txt; echo; cat /m; echo").split() == [
        "hello",
        "hello",
    ]


@pytest.mark.docker
def test_a_failing_step_names_itself_its_exit_code_and_its_output(client):
    dockerfile = f"FROM {BASE_IMAGE}\nRUN echo starting\nRUN echo about to fail >&2; exit 3\n"

    with pytest.raises(BuildFailed) as failed:
        build(client, dockerfile)

    message = str(failed.value)
    assert "step 3 (RUN echo about to fail >&2; exit 3)" in message
    assert "returned a non-zero code: 3" in message
    assert "about to fail" in message.split("--- build log ---")[1]


@pytest.mark.docker
@pytest.mark.parametrize(
    ("dockerfile", "why"),
    [
        (
            "FROM belvedir-no-such-image:1\nRUN true\n",
            "FROM belvedir-no-such-image:1: not an allowed base image",
        ),
        (f"FROM {BASE_IMAGE}\nONBUILD RUN true\n", "ONBUILD is not supported"),
        (f"FROM {BASE_IMAGE}\nRUN --mount=type=cache,target=/c true\n", "RUN flags"),
        ("RUN true\n", "RUN before FROM"),
    ],
)
def test_what_cannot_be_built_so_is_refused_before_any_code_runs(client, dockerfile, why):
    with pytest.raises(BuildFailed, match=why.replace("(", r"\(").replace(")", r"\)")):
        build(client, dockerfile)


@pytest.mark.docker
def test_an_allowed_base_the_engine_lacks_is_not_pulled_unless_the_operator_allows_pulls(client):
    policy = dataclasses.replace(POLICY, bases=(BASE_IMAGE, "belvedir-no-such-image:1"))

    with pytest.raises(BuildFailed, match=r"not on the engine, and pulls are off"):
        build(client, "FROM belvedir-no-such-image:1\nRUN true\n", policy=policy)


@pytest.mark.docker
def test_a_step_past_the_builds_time_limit_is_stopped_and_removed(client):
    started = time.monotonic()

    with pytest.raises(BuildFailed, match="longer than its time limit"):
        build(client, f"FROM {BASE_IMAGE}\nRUN sleep 60\n", timeout=8)

    assert time.monotonic() - started < 30
    left = client.containers.list(all=True, filters={"label": "belvedir.test=task-build"})
    assert left == []


def test_the_dockerfile_is_read_as_docker_reads_it():
    steps = dockerfile.parse(
        "# escape=`\n# a comment\nFROM base AS b\n\nRUN echo a `\n  # inside\n  && echo b\n"
        'SHELL ["/bin/bash", "-c"]\nrun true'
    )

    assert [(s.keyword, s.rest) for s in steps] == [
        ("FROM", "base AS b"),
        ("RUN", "echo a   && echo b"),  # the continuation line keeps its indent
        ("SHELL", '["/bin/bash", "-c"]'),
        ("RUN", "true"),
    ]
    values = {"A": "1", "E": ""}
    assert dockerfile.expand("$A-${A}-${E:-d}-${A:+set}-${E:+x}-\\$A-$NONE", values) == (
        "1-1-d-set--$A-"
    )


def test_continuations_are_joined_as_docker_joins_them():
    steps = dockerfile.parse(
        "FROM base\nRUN echo foo\\\nbar && \\\n\n    echo baz \\  \n# note\n  && true\nRUN last\n"
    )

    # The escape and line break go, nothing is added; empty and comment lines are skipped.
    assert [s.rest for s in steps[1:]] == ["echo foobar &&     echo baz   && true", "last"]


def test_a_runs_heredocs_are_read_with_it():
    steps = dockerfile.parse(
        "FROM base\nRUN <<EOF\necho one\n\n# kept\nEOF\n"
        "RUN python3 - <<-'PY' <<<here $((1<<2))\n\tprint(1)\n\tPY\nRUN cat <<<x\n"
    )

    assert [(s.keyword, s.heredocs) for s in steps] == [
        ("FROM", ()),
        ("RUN", (("EOF", "echo one\n\n# kept\n"),)),
        ("RUN", (("PY", "print(1)\n"),)),
        ("RUN", ()),
    ]


@pytest.mark.docker
def test_heredoc_runs_and_an_inherited_shell_run_as_buildkit_runs_them(client):
    dockerfile = (
        f'FROM {BASE_IMAGE} AS first\nSHELL ["/bin/bash", "-c"]\n'
        "FROM first\nUSER root\nRUN echo ${BASH_VERSION:+bash} > /shell\n"
        "RUN <<EOF\necho one > /h\necho two >> /h\nEOF\n"
        "RUN <<EOF\n#!/usr/bin/env python3\nopen('/p', 'w').write('python')\nEOF\n"
        "RUN cat > /c <<'END'\n$HOME\nEND\n"
    )

    tag = build(client, dockerfile)

    assert run(client, tag, "cat /shell /h /p; echo; cat /c").split() == [
        "bash",
        "one",
        "two",
        "python",
        "$HOME",
    ]


@pytest.mark.docker
def test_a_failed_build_leaves_none_of_its_own_images(client):
    marker = secrets.token_hex(8)  # every image past the LABEL carries it (a commit keeps it)
    dockerfile = (
        f"FROM {BASE_IMAGE}\nLABEL belvedir.test-marker={marker}\nUSER root\nRUN echo a > /a\n"
        "ENV A=1\nRUN echo b > /b\nRUN exit 2\n"
    )

    with pytest.raises(BuildFailed, match="non-zero code: 2"):
        build(client, dockerfile)

    made = client.images.list(all=True, filters={"label": f"belvedir.test-marker={marker}"})
    assert made == []


@pytest.mark.docker
def test_the_tasks_dockerignore_is_honoured_as_the_docker_cli_honours_it(client):
    files = {
        ".dockerignore": "# not these\nsecret.txt\n/logs\n!logs/keep\nDockerfile\n",
        "secret.txt": "s",
        "a": "a",
        "logs/x": "x",
        "logs/keep": "k",
    }

    marker = secrets.token_hex(8)  # no build cache from an earlier build
    dockerfile = f"FROM {BASE_IMAGE}\nLABEL m={marker}\nCOPY . /ctx\nRUN true\nCOPY . /ctx2\n"

    tag = build(client, dockerfile, files)

    listed = run(
        client, tag, "cd /ctx && find . -mindepth 1 | sort; diff -r /ctx /ctx2 && echo same"
    )
    assert listed.split() == ["./.dockerignore", "./a", "./logs", "./logs/keep", "same"]


@pytest.mark.docker
def test_the_run_steps_together_write_at_most_the_disk_limit(client):
    policy = dataclasses.replace(POLICY, disk=64 * 2**20)
    write = "RUN dd if=/dev/zero of=/{} bs=1M count=40 status=none\n"
    dockerfile = f"FROM {BASE_IMAGE}\nUSER root\n{write.format('a')}{write.format('b')}RUN true\n"

    with pytest.raises(
        BuildFailed, match=r"step 4 \(RUN dd .*\): the build wrote more than the 64 MiB"
    ):
        build(client, dockerfile, policy=policy)

    left = client.containers.list(all=True, filters={"label": "belvedir.test=task-build"})
    assert left == []


@pytest.mark.docker
def test_stage_names_are_case_insensitive_as_docker_reads_them(client):
    dockerfile = (
        f"FROM {BASE_IMAGE} AS Builder\nUSER root\nRUN echo built > /x\n"
        f"FROM builder AS Second\nFROM {BASE_IMAGE}\nCOPY --from=BUILDER /x /x\n"
        "COPY --from=second /x /y\n"
    )

    assert run(client, build(client, dockerfile), "cat /x /y").split() == ["built", "built"]


@pytest.mark.docker
def test_a_step_that_cannot_start_is_the_tasks_failure_not_the_engines(client):
    with pytest.raises(
        BuildFailed, match=r"step 3 \(RUN true\): the step could not start: .*nosuch"
    ):
        build(client, f"FROM {BASE_IMAGE}\nUSER nosuchuser\nRUN true\n")


@pytest.mark.docker
def test_pulling_a_missing_base_image_stays_within_the_builds_time_limit(client):
    registry = socket.socket()  # a registry on this machine that never answers
    registry.bind(("127.0.0.1", 0))
    registry.listen(8)
    held: list[socket.socket] = []

    def hold() -> None:
        with contextlib.suppress(OSError):  # closed at the end
            while True:
                held.append(registry.accept()[0])

    threading.Thread(target=hold, daemon=True).start()
    started = time.monotonic()

    image = f"127.0.0.1:{registry.getsockname()[1]}/slow:1"
    policy = dataclasses.replace(POLICY, bases=(image,), pull=True)  # the operator allows it

    with pytest.raises(BuildFailed, match="longer than its time limit"):
        build(client, f"FROM {image}\nRUN true\n", timeout=4, policy=policy)

    assert time.monotonic() - started < 12  # the engine itself gives up only after ~25 s
    assert held  # the engine did try to pull
    registry.close()


@pytest.mark.docker
def test_a_forced_build_removes_the_image_it_replaces(client):
    dockerfile = (
        f"FROM {BASE_IMAGE}\nLABEL m={secrets.token_hex(8)}\nUSER root\nRUN date +%N > /t\n"
    )
    tag = build(client, dockerfile)
    first = client.api.inspect_image(tag)["Id"]
    path = client.tmp / f"{tag.replace(':', '-')}.tar.gz"

    ensure_image(
        client, context=path, tag=tag, force=True, timeout=300, steps=LIMITS, policy=POLICY
    )

    assert client.api.inspect_image(tag)["Id"] != first
    with pytest.raises(docker.errors.ImageNotFound):
        client.api.inspect_image(first)
