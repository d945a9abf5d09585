"""A scripted test model: a local OpenAI-compatible server (tests/router/fake_upstream.py)
answering each chat completion with the next of its scripted replies (the last one repeats).

    with ScriptedModel([json.dumps(tasks)]) as model:
        ... model.base_url ...; model.requests holds every request's JSON body
"""

import threading

from tests.router.fake_upstream import FakeUpstream


class ScriptedModel(FakeUpstream):
    def __init__(self, replies: list[str], **kwargs):
        super().__init__(**kwargs)
        self.replies = list(replies)
        self._served = 0
        self._script_lock = threading.Lock()

    def completion(self, body: dict) -> dict:
        with self._script_lock:
            reply = self.replies[min(self._served, len(self.replies) - 1)]
            self._served += 1
        document = super().completion(body)
        document["choices"][0]["message"]["content"] = reply
        return document
