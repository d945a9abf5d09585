"""Outcomes an SDK reports for a session (`POST /api/v1/outcomes`)."""

from django.db import transaction
from django.utils import timezone

from belvedir.errors import DomainError
from belvedir.models import ApiKey
from belvedir.validators import storable
from traces.models import Outcome, Session
from traces.semconv import MAX_SESSION_ID_CHARS
from traces.services.task_forming import groups_refresh


def _stored_session_id(session_id: str) -> str:
    """The id as ingest stores it: NUL and lone surrogates (which PostgreSQL refuses) replaced
    like the decoder does, then stripped and cut like ``session_id_of``."""
    return storable(session_id).strip()[:MAX_SESSION_ID_CHARS]


def outcome_record(*, key: ApiKey, session_id, outcome) -> Session | None:
    """Record the outcome; None when the key's project has no such session (or a run's key
    asks about another run's session), which the endpoint answers with a 404."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise DomainError("session_id must be a non-empty string.", field="session_id")
    if outcome not in Outcome.values:
        raise DomainError('outcome must be "success" or "fail".', field="outcome")
    external_id = _stored_session_id(session_id)
    session = Session.objects.filter(project=key.project, external_id=external_id).first()
    if session is not None and key.kind == ApiKey.Kind.RUN and session.run_id != key.run_id:
        session = None  # a run's key speaks for its own run's sessions only
    if session is None:
        return None
    with transaction.atomic():
        session.outcome = outcome
        session.outcome_at = timezone.now()
        session.save(update_fields=["outcome", "outcome_at"])
        groups_refresh({t.group_id for t in session.tasks.all() if t.group_id})
    return session
