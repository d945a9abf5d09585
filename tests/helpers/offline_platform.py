"""The platform as an offline install runs it, for end-to-end tests through the API and a queue
worker: the live server (API, router, task sandboxes), its sandboxes on an egress-off network
(tests/helpers/offline_network.py) reaching it only through a sandbox gateway there, and the
runs cluster (`manage.py qcluster`, one worker, on this test's database) with the same
settings as this process.

    with offline_platform(offline_network, live_server, tmp / "qcluster.log", **settings) as log:
        ... launch through owner.api, wait for the run; log is the cluster's output ...
"""

import contextlib
from pathlib import Path

from django.conf import settings as django_settings
from django.test.utils import override_settings

from sandboxes.gateway import GatewayThread
from tests.helpers.harbor import harbor_image
from tests.helpers.offline_network import network_settings
from tests.helpers.run_fixtures import sandbox_ports, worker_env
from tests.router.helpers import free_port, serving_app
from tests.runs.helpers import start_qcluster, stop_qcluster, subprocess_database_url


def _env_text(value) -> str:
    """A setting as its environment variable spells it (a list comma-separated)."""
    return ",".join(value) if isinstance(value, list | tuple) else str(value)


@contextlib.contextmanager
def offline_platform(network, live_server, log: Path, *, asgi: bool = False, **values):
    """The platform at `live_server` with its sandboxes on `network`, a Harbor run's sandbox in
    the Harbor image, test-sized sandboxes, and `values` over them: its sandbox gateway on the
    network, the settings of this process and of the runs cluster's worker alike; the
    cluster is stopped afterwards as scripts/up.sh stops it. Yields the cluster's log.

    `asgi`: what sandboxes call (the router, whose streams need ASGI; exports; task
    sandboxes) is served by uvicorn instead (tests/router/helpers.py: `serving_app`, on this
    test's database, with the same settings), beside the live server's."""
    values = {
        **network_settings(network),
        "BELVEDIR_HARBOR_IMAGE": harbor_image(),
        "BELVEDIR_SANDBOX_MEMORY": "2g",
        "BELVEDIR_SANDBOX_CPUS": 1.0,
        "BELVEDIR_SANDBOX_DISK": 2 * 2**30,
        **values,
    }
    with contextlib.ExitStack() as stack:
        served = live_server.url
        if asgi:
            port = free_port()
            served = f"http://127.0.0.1:{port}"
            env = {**worker_env(django_settings), **values, "BELVEDIR_BASE_URL": served}
            del env["BELVEDIR_SANDBOX_BASE_URL"]  # the gateway's, made for what it serves
            env = {k: _env_text(v) for k, v in env.items()}
            stack.enter_context(serving_app(log.parent, port, **env))
        gateway = GatewayThread(host=network.gateway, ports=sandbox_ports(), upstream=served)
        stack.callback(gateway.stop)
        values |= {"BELVEDIR_SANDBOX_BASE_URL": gateway.url, "BELVEDIR_BASE_URL": served}
        stack.enter_context(override_settings(**values))
        assert subprocess_database_url()  # the test database exists (django_db_setup)
        process = start_qcluster(
            "runs",
            log,
            Q_WORKERS="1",
            **{**worker_env(django_settings), **{k: _env_text(v) for k, v in values.items()}},
        )
        stack.callback(stop_qcluster, process)
        yield log
