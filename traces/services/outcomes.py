"""Outcomes an SDK reports for a session (`POST /api/v1/outcomes`)."""

from django.db import transaction
from django.utils import timezone

from belvedir.errors import Invalid, NotFound
from belvedir.models import ApiKey
from belvedir.validators import storable
from runs.selectors import run_of_key
from traces.models import Outcome, Session
from traces.semconv import MAX_SESSION_ID_CHARS
from traces.services.task_forming import groups_refresh


def _stored_session_id(session_id: str) -> str:
    """The id as ingest stores it: NUL and lone surrogates (which PostgreSQL refuses) replaced
    like the decoder does, then stripped and cut like ``session_id_of``."""
    return storable(session_id).strip()[:MAX_SESSION_ID_CHARS]


def outcome_record(*, key: ApiKey, session_id, outcome) -> Session:
    """Record the outcome. NotFound when the key's project has no such session, or when a
    run's key names another run's session."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise Invalid("session_id must be a non-empty string.", field="session_id")
    if outcome not in Outcome.values:
        raise Invalid('outcome must be "success" or "fail".', field="outcome")
    external_id = _stored_session_id(session_id)
    session = Session.objects.filter(project=key.project, external_id=external_id).first()
    if session is not None and key.kind == ApiKey.Kind.RUN:
        run = run_of_key(key)
        if run is None or session.run_id != run.pk:
            session = None  # a run's key speaks for its own run's sessions only
    if session is None:
        raise NotFound("No session with this id in the project.", field="session_id")
    with transaction.atomic():
        session.outcome = outcome
        session.outcome_at = timezone.now()
        session.save(update_fields=["outcome", "outcome_at"])
        groups_refresh({t.group_id for t in session.tasks.all() if t.group_id})
    return session
