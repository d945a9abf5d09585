"""The one scoping helper: every page and API resolves objects through it.

- `access.get(Model, pk=…)`: one object the caller may open (any project of their
  organization, or the key's project), else 404; with `write=True`, 403 for a read-only member.
- `access.scoped(Model)`: the rows of the caller's current project, what list pages and list
  APIs show. Selectors take that project (`runs_for(project=access.project)`).

Another organization's object is a 404; a read-only member's write is a 403.
"""

from dataclasses import dataclass

from django.db.models import Model, QuerySet

from belvedir.errors import Forbidden, NotFound
from belvedir.models import (
    MANAGE_ROLES,
    WRITE_ROLES,
    ApiKey,
    Membership,
    Organization,
    Project,
    Role,
)

SESSION_PROJECT = "belvedir_project_id"


@dataclass
class Access:
    organization: Organization
    project: Project
    role: str
    user: object | None = None
    api_key: ApiKey | None = None

    def get_role_display(self) -> str:
        return Role(self.role).label if self.role in Role.values else self.role

    @property
    def can_write(self) -> bool:
        return self.role in WRITE_ROLES

    @property
    def can_manage(self) -> bool:
        return self.role in MANAGE_ROLES

    def require_write(self) -> None:
        if not self.can_write:
            raise Forbidden("Read-only members cannot change anything.")

    def require_manage(self) -> None:
        if not self.can_manage:
            raise Forbidden("Only owners and admins can do this.")

    def require_owner(self) -> None:
        if self.role != Role.OWNER:
            raise Forbidden("Only owners can do this.")

    def scope(
        self, queryset: QuerySet | type[Model], *, project_field: str = "project"
    ) -> QuerySet:
        """Project-owned rows the caller may open: the key's project, or the whole organization."""
        queryset = _queryset(queryset)
        if self.api_key is not None:
            return queryset.filter(**{project_field: self.project})
        return queryset.filter(**{f"{project_field}__organization": self.organization})

    def scoped(
        self, queryset: QuerySet | type[Model], *, project_field: str = "project"
    ) -> QuerySet:
        """Project-owned rows of the caller's current project (a key's is its own)."""
        return _queryset(queryset).filter(**{project_field: self.project})

    def get(
        self,
        queryset: QuerySet | type[Model],
        *,
        write: bool = False,
        project_field: str = "project",
        **lookup,
    ):
        """One object in scope, else 404; a write by a read-only member is 403."""
        obj = self.scope(queryset, project_field=project_field).filter(**lookup).first()
        if obj is None:
            raise NotFound("Not found.")
        if write:
            self.require_write()
        return obj


def _queryset(source: QuerySet | type[Model]) -> QuerySet:
    return source.objects.all() if isinstance(source, type) else source


def access_for_key(key: ApiKey) -> Access:
    project = key.project
    return Access(organization=project.organization, project=project, role=Role.MEMBER, api_key=key)


def projects_of(user) -> QuerySet[Project]:
    """Every project of every organization the user is a member of."""
    return Project.objects.select_related("organization").filter(
        organization__memberships__user=user
    )


def access_for_user(user, session=None) -> Access | None:
    """The signed-in user's current organization and project (from the session)."""
    if not getattr(user, "is_authenticated", False):
        return None
    project_id = session.get(SESSION_PROJECT) if session is not None else None
    project = None
    if project_id:
        project = projects_of(user).filter(pk=project_id).first()
    if project is None:
        project = projects_of(user).order_by("organization__created_at", "created_at").first()
    if project is None:
        return None
    role = Membership.objects.filter(user=user, organization=project.organization).values_list(
        "role", flat=True
    )[0]
    return Access(organization=project.organization, project=project, role=role, user=user)


def access_for_request(request) -> Access:
    """Access for a page or API request; 404 when the caller belongs nowhere."""
    cached = getattr(request, "_belvedir_access", None)
    if cached is not None:
        return cached
    auth = getattr(request, "auth", None)
    # The key is on DRF's request; the plain HttpRequest (templates, the browsable API) only
    # has DRF's user for it, which carries the key.
    key = auth if isinstance(auth, ApiKey) else getattr(getattr(request, "user", None), "key", None)
    if isinstance(key, ApiKey):
        access = access_for_key(key)
    else:
        access = access_for_user(request.user, getattr(request, "session", None))
    if access is None:
        raise NotFound("You are not a member of any organization.")
    request._belvedir_access = access
    return access


def switch_project(request, project_id: str) -> Project:
    project = projects_of(request.user).filter(pk=project_id).first()
    if project is None:
        raise NotFound("Not found.")
    request.session[SESSION_PROJECT] = project.pk
    request._belvedir_access = None
    return project
