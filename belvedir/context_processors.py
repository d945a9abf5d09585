from belvedir.access import access_for_request, projects_of
from belvedir.errors import NotFound


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
    return {"access": access, "switch_projects": projects_of(user)}
