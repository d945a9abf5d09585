"""A command's output waits in the engine, not in the platform's memory, while its reader is
slow: the exec stream reads from Docker only as fast as it is read (a bounded backlog), and
its reading thread ends when the stream is closed."""

import threading
import time

import docker
import pytest

from sandboxes import taskexec

pytestmark = pytest.mark.docker


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def container():
    client = docker.from_env()
    running = client.containers.run(
        "belvedir-sandbox:latest",
        ["120"],
        entrypoint=["sleep"],
        detach=True,
        labels={"belvedir.test": "task-sandbox-exec-backlog"},
    )
    try:
        yield client, running
    finally:
        running.remove(force=True)
        client.close()


def test_a_slow_reader_holds_the_commands_output_back_in_the_engine(container):
    client, running = container
    threads = threading.active_count()
    events = taskexec.exec_events(
        client,
        running.id,
        command="head -c 400000000 /dev/zero",
        cwd=None,
        env={},
        timeout=60,
    )
    assert next(events)["stream"] == "stdout"
    before = rss_bytes()
    time.sleep(6)  # the reader takes nothing meanwhile

    grown = rss_bytes() - before

    assert grown < 64 * 2**20, f"the platform took {grown / 2**20:.0f} MiB of output in"
    events.close()
    deadline = time.monotonic() + 10
    while threading.active_count() > threads and time.monotonic() < deadline:
        time.sleep(0.2)
    assert threading.active_count() == threads  # the reading thread ended
