"""The outcome service reports an unknown session with the domain NotFound, not DoesNotExist."""

import pytest


def test_the_outcome_service_raises_the_domain_not_found_for_an_unknown_session(owner):
    from belvedir.errors import NotFound
    from belvedir.services import api_key_authenticate
    from traces.services.outcomes import outcome_record

    with pytest.raises(NotFound) as missing:
        outcome_record(key=api_key_authenticate(owner.key), session_id="nobody", outcome="fail")
    assert missing.value.field == "session_id"
