"""The one check of "is this the run's own key", beside belvedir/access.py (which scopes every
other caller): a per-run key (`ApiKey.Kind.RUN`, minted at launch, revoked when the run ends)
opens its own run only. The run is the key's reverse one-to-one (`runs.Run.ingest_key`,
related name `ingest_run`), so the ground floor imports no app to find it."""

from belvedir.errors import Forbidden, NotFound
from belvedir.models import ApiKey


def own_run(request, *, run_id: str | None = None, refuse: str = "", code: str | None = None):
    """The run whose own key made `request`; None for any other caller, or with `refuse`
    a 403 saying it (`code`: its reason). A run key whose run is gone, or (`run_id`) that is
    another run's, is a 404, as an outsider's request is."""
    key = request.auth
    if not isinstance(key, ApiKey) or key.kind != ApiKey.Kind.RUN:
        if refuse:
            raise Forbidden(refuse, code=code)
        return None
    run = getattr(key, "ingest_run", None)  # none: RelatedObjectDoesNotExist, an AttributeError
    if run is None or (run_id is not None and run.pk != run_id):
        raise NotFound("Not found.")
    return run
