"""Launches and cancels are in the organization's audit log."""

import pytest

from belvedir.models import AuditEvent

pytestmark = [pytest.mark.docker]  # a cancel asks the Docker engine to kill the sandbox


def test_a_launch_and_a_cancel_are_audited_with_their_actor(owner, make_harness):
    harness = make_harness(env={"MODEL": "acme/m"})
    body = {"harness": harness.pk, "model_api_key": "sk-own-key"}  # acme/m is not covered
    launched = owner.api.post("/api/v1/runs", body, format="json").json()
    owner.web.post(f"/runs/{launched['id']}/cancel/")
    runs = AuditEvent.objects.filter(organization=owner.org, action__startswith="run.")
    launch, cancel = runs.order_by("id")
    assert (launch.action, launch.target) == ("run.launch", launched["id"])
    assert launch.metadata == {"harness": harness.pk, "model": "acme/m"}
    assert launch.actor_key is not None and launch.actor_key.name == "tests"
    assert (cancel.action, cancel.target) == ("run.cancel", launched["id"])
    assert cancel.actor_user == owner.user and cancel.metadata == {"status_before": "queued"}
