from django.db import models
from django.utils import timezone

from belvedir import ids


class Outcome(models.TextChoices):
    SUCCESS = "success", "Success"
    FAIL = "fail", "Fail"


class Session(models.Model):
    """Every span with the same session id (or, lacking one, the same trace) in a project."""

    id = models.CharField(primary_key=True, max_length=32, default=ids.session_id, editable=False)
    # No index of its own: the (project, external id) and (project, last received) ones lead
    # with it (each index is written on every ingest batch that moves last_received_at).
    project = models.ForeignKey(
        "belvedir.Project", on_delete=models.CASCADE, related_name="trace_sessions", db_index=False
    )
    external_id = models.CharField(max_length=255)
    run = models.ForeignKey(
        "runs.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="sessions",
        db_index=False,  # its index below, without the LIKE twin
    )
    outcome = models.CharField(max_length=8, choices=Outcome.choices, blank=True)
    outcome_at = models.DateTimeField(null=True, blank=True)
    model = models.CharField(max_length=200, blank=True)
    model_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When the LLM span the model was read from started"
    )
    span_count = models.PositiveIntegerField(default=0)
    llm_call_count = models.PositiveIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    first_seen_at = models.DateTimeField(default=timezone.now)
    last_received_at = models.DateTimeField(default=timezone.now, db_index=True)
    tasks_formed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-last_received_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="session_unique_in_project"
            )
        ]
        indexes = [
            models.Index(fields=["project", "-last_received_at"]),
            models.Index(fields=["run"], name="traces_session_run"),
        ]

    def __str__(self) -> str:
        return self.external_id

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Span(models.Model):
    """One stored span. An LLM call's parsed fields live on its span (is_llm).

    Every index costs each ingested span an insert, so the table keeps four: the key, the
    unique (project, trace id, span id) (which serves project and trace lookups too),
    (session, start time) (which serves session lookups) and run.
    """

    # No foreign-key constraint in the database: a span's project is its session's (which has
    # one), and checking it cost every stored span a lookup and a shared lock on the same
    # project row. Deleting a project still deletes its spans (Django's collector cascades).
    project = models.ForeignKey(
        "belvedir.Project",
        on_delete=models.CASCADE,
        related_name="spans",
        db_index=False,
        db_constraint=False,
    )
    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="spans",
        db_index=False,
    )
    run = models.ForeignKey(
        "runs.Run",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="spans",
        db_index=False,
    )
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.CharField(max_length=500)
    kind = models.CharField(max_length=12, blank=True)
    span_kind = models.CharField(max_length=12, blank=True, help_text="traceloop.span.kind")
    entity_name = models.CharField(max_length=500, blank=True)
    start_time = models.DateTimeField()
    end_time = models.DateTimeField()
    duration_ms = models.FloatField(default=0)
    status_code = models.CharField(max_length=8, default="unset")
    status_message = models.TextField(blank=True)
    attributes = models.JSONField(default=dict)
    events = models.JSONField(default=list)
    resource = models.JSONField(default=dict)
    scope_name = models.CharField(max_length=200, blank=True)
    is_llm = models.BooleanField(default=False)
    model = models.CharField(max_length=200, blank=True)
    input_messages = models.JSONField(default=list)
    output_messages = models.JSONField(default=list)
    input_tokens = models.IntegerField(null=True, blank=True)
    output_tokens = models.IntegerField(null=True, blank=True)
    total_tokens = models.IntegerField(null=True, blank=True)
    # The router's own record of a covered call (router.services), never an uploaded span's.
    from_router = models.BooleanField(default=False)
    # A client's LLM span of a call the router recorded too: the router's span, whose tokens
    # and cost count (this one is kept, shown, and left out of every count). Only a link: no
    # constraint, no index (ingest finds twins by trace and by session, see services/ingest.py).
    duplicate_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["start_time"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "trace_id", "span_id"], name="span_unique_in_project"
            )
        ]
        indexes = [
            models.Index(fields=["session", "start_time"]),
            models.Index(fields=["run"], name="traces_span_run"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.span_id})"

    @property
    def duplicate(self) -> bool:
        """A client's record of a call the router recorded too (not counted)."""
        return self.duplicate_of_id is not None


class TaskGroup(models.Model):
    """Tasks of the same normalized name, across sessions."""

    id = models.CharField(
        primary_key=True, max_length=32, default=ids.task_group_id, editable=False
    )
    project = models.ForeignKey(
        "belvedir.Project", on_delete=models.CASCADE, related_name="task_groups"
    )
    normalized_name = models.CharField(max_length=300)
    name = models.CharField(max_length=500)
    task_count = models.PositiveIntegerField(default=0)
    success_count = models.PositiveIntegerField(default=0)
    fail_count = models.PositiveIntegerField(default=0)
    last_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-last_seen_at"]
        indexes = [models.Index(fields=["project", "-last_seen_at"], name="taskgroup_project_seen")]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "normalized_name"], name="task_group_unique_name"
            )
        ]

    def __str__(self) -> str:
        return self.name


class Task(models.Model):
    """A unit of work in a session: a workflow or task span, else the whole session."""

    id = models.CharField(primary_key=True, max_length=32, default=ids.task_id, editable=False)
    project = models.ForeignKey("belvedir.Project", on_delete=models.CASCADE, related_name="tasks")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="tasks")
    group = models.ForeignKey(
        TaskGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="tasks"
    )
    span = models.ForeignKey(
        Span, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    name = models.CharField(max_length=500)
    normalized_name = models.CharField(max_length=300)
    kind = models.CharField(max_length=12, help_text="workflow, task or session")
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    llm_call_count = models.PositiveIntegerField(default=0)
    total_tokens = models.BigIntegerField(default=0)
    status = models.CharField(max_length=8, default="ok")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["started_at"]
        indexes = [  # the task lists, newest first (a group's filters these)
            models.Index(fields=["project", "-started_at"], name="task_project_newest"),
        ]

    def __str__(self) -> str:
        return self.name
