from belvedir.access import access_for_request, memberships_of
from belvedir.errors import NotFound
from belvedir.models import Project


def tenancy(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    try:
        access = access_for_request(request)
    except NotFound:
        return {}
    if access.api_key is not None:  # an API key, in the browsable API: its project only
        return {"access": access, "switch_projects": [access.project]}
    orgs = [m.organization for m in memberships_of(user)]
    projects = Project.objects.filter(organization__in=orgs).select_related("organization")
    return {"access": access, "switch_projects": projects}
