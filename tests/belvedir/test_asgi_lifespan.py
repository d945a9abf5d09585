"""The ASGI lifespan (uvicorn sends it once per worker process): startup readies the process
for requests, shutdown runs what the apps left for it."""

import gc

from belvedir.asgi import application
from tests.helpers import aio


def _lifespan() -> list[str]:
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message["type"])

    aio.run(application({"type": "lifespan"}, receive, send))
    return sent


def test_startup_leaves_the_started_process_s_objects_out_of_full_collections():
    gc.unfreeze()
    try:
        assert _lifespan() == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
        # the modules, models and URLconf a worker holds: no full collection walks them again
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
