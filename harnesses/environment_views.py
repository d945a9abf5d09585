"""Environment pages: list, detail (tasks, versions), the task editor (new, edit, import),
delete, "Use in a harness", and generation (a form, its progress, the preview to save)."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from belvedir.access import access_for_request
from belvedir.error_responses import form_status, form_submit
from belvedir.errors import DomainError, Invalid
from belvedir.http import see_other, see_other_page
from harnesses import environment_editor as editor
from harnesses import environments, generation, tasks_format
from harnesses.catalog import RUNNERS, SCAFFOLDS, presets_by_group
from harnesses.environment_export import environment_export_response
from harnesses.models import Environment, EnvironmentGeneration
from harnesses.selectors import environments_for, generations_pending

PRESET_CHOICES = [
    ("harbor-runner", "Belvedir Runner on Harbor (each task in its own container)"),
    ("runner", "Belvedir Runner (one sandbox; judge and rubric tasks)"),
    ("", "No harness now"),
]


@login_required
def environment_list(request):
    access = access_for_request(request)
    page = Paginator(environments_for(project=access.project), 25).get_page(request.GET.get("page"))
    pending = generations_pending(project=access.project)[:10]
    return render(request, "environments/list.html", {"page": page, "pending": pending})


def _backing_cards():
    """The catalog cards shown under "Use in a harness": the runners and the scaffolds."""
    return [(g, presets) for g, presets in presets_by_group() if g in (RUNNERS, SCAFFOLDS)]


@login_required
def environment_detail(request, environment_id: str):
    access = access_for_request(request)
    environment = access.get(Environment, pk=environment_id)
    number = request.GET.get("version")
    version = environment.versions.filter(
        number=int(number) if number and number.isdigit() else environment.version
    ).first()
    if version is None:
        raise Invalid(f"This environment has no version {number}.", field="version")
    context = {
        "environment": environment,
        "version": version,
        "tasks": version.tasks,
        "versions": environment.versions.select_related("created_by")[:50],  # who made each
        "cards": _backing_cards(),
    }
    return render(request, "environments/detail.html", context)


@login_required
def environment_export(request, environment_id: str):
    """The Harbor export as a zip download (any member: it is a read)."""
    access = access_for_request(request)
    environment = access.get(Environment, pk=environment_id)
    return environment_export_response(environment=environment, limit=request.GET.get("limit"))


def _editor_response(request, context: dict, status: int = 200):
    template = "environments/edit.html"
    if request.htmx:
        template += "#editor"
    return render(request, template, context, status=status)


def _import_rows(request, rows: list) -> list:
    upload = request.FILES.get("tasks_file")
    if upload is None:
        raise Invalid("Choose a tasks file to import.", field="tasks_file")
    tasks_format.size_check(upload.size, "tasks_file", name=upload.name)
    try:
        text = upload.read().decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid(f"{upload.name} is not UTF-8 text.", field="tasks_file") from None
    imported = editor.rows_from_tasks(tasks_format.parse_tasks(text))
    kept = [row for row in rows if row.prompt.strip() or row.id]
    return kept + imported


def _editor(request, context: dict, save):
    """A POST of the task editor: a button's action redraws it; Save calls
    `save(name, description, tasks, post)` for the answer, or shows its error on the editor."""
    rows = editor.rows_from_post(request.POST)
    context.update(
        name=request.POST.get("name", ""),
        description=request.POST.get("description", ""),
        preset=request.POST.get("preset", context.get("preset", "")),
    )
    action = request.POST.get("action", "save")
    error = None
    try:
        if action == "save":
            return save(
                context["name"],
                context["description"],
                editor.tasks_from_rows(rows),
                request.POST,
            )
        if action == "import":
            rows = _import_rows(request, rows)
        else:
            rows = editor.apply(rows, action)
    except DomainError as exc:
        error = exc
        editor.mark_error(rows, exc)
    context.update(rows=rows, error=error)
    return _editor_response(request, context, status=400 if error else 200)


def _editor_context(**extra) -> dict:
    return {"kinds": editor.KINDS, "preset_choices": PRESET_CHOICES, **extra}


@login_required
def environment_new(request):
    access = access_for_request(request)
    context = _editor_context(title="New environment", action_url=reverse("environments:new"))
    if request.method != "POST":
        context.update(rows=[editor.Row()], name="", description="")
        return _editor_response(request, context)
    access.require_write()

    def save(name, description, tasks, post):
        environment = environments.environment_create(
            project=access.project,
            created_by=request.user,
            name=name,
            description=description,
            tasks=tasks,
        )
        messages.success(request, f"Environment {environment.name} created.")
        return see_other_page(request, "environments:detail", environment.pk)

    return _editor(request, context, save)


@login_required
def environment_edit(request, environment_id: str):
    access = access_for_request(request)
    environment = access.get(Environment, pk=environment_id)
    context = _editor_context(
        title=f"Edit {environment.name}",
        environment=environment,
        action_url=reverse("environments:edit", args=[environment.pk]),
    )
    if request.method != "POST":
        tasks = environments.environment_tasks(environment=environment)
        context.update(
            rows=editor.rows_from_tasks(tasks),
            name=environment.name,
            description=environment.description,
        )
        return _editor_response(request, context)
    access.require_write()

    def save(name, description, tasks, post):
        saved = environments.environment_update(
            environment=environment,
            updated_by=request.user,
            name=name,
            description=description,
            tasks=tasks,
        )
        if saved.version == environment.version:
            messages.info(request, "Nothing changed: no new version.")
        else:
            messages.success(request, f"Saved as version {saved.version}.")
        return see_other_page(request, "environments:detail", saved.pk)

    return _editor(request, context, save)


@login_required
@require_POST
def environment_delete(request, environment_id: str):
    access = access_for_request(request)
    environment = access.get(Environment, write=True, pk=environment_id)
    environments.environment_delete(environment=environment)
    messages.info(request, f"Environment {environment.name} deleted.")
    return see_other("environments:list")


@login_required
@require_POST
def environment_harness(request, environment_id: str):
    """ "Use in a harness": a harness from the card picked, its Tasks from the environment."""
    access = access_for_request(request)
    environment = access.get(Environment, write=True, pk=environment_id)
    harness = environments.environment_harness_create(
        environment=environment, preset=request.POST.get("preset", ""), created_by=request.user
    )
    messages.success(request, f"Harness {harness.name} created from {environment.name}.")
    return see_other_page(request, "harnesses:detail", harness.pk)


class GenerateForm(forms.Form):
    description = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="What the tasks should test: the work, the audience, what a good answer does.",
    )
    name = forms.CharField(required=False, max_length=120, help_text="The environment's name.")
    count = forms.IntegerField(initial=5, min_value=1, max_value=generation.MAX_TASKS)
    model = forms.CharField(
        max_length=200, help_text="The model that writes the tasks, e.g. openai/gpt-4.1-mini."
    )
    model_api_base = forms.CharField(
        required=False, label="Model API base", help_text="Blank: inferred from the model id."
    )
    model_api_key = forms.CharField(
        required=False,
        label="Model API key",
        widget=forms.PasswordInput(render_value=False),
        help_text="Your key; blank for a model Belvedir covers.",
    )
    preset = forms.ChoiceField(
        choices=PRESET_CHOICES,
        required=False,
        initial="harbor-runner",
        widget=forms.RadioSelect,
        label="Harness",
        help_text="The harness made from the environment when you save it.",
    )


@login_required
def environment_generate(request):
    access = access_for_request(request)
    if request.method == "POST":
        access.require_write()
        form = GenerateForm(request.POST)
        row = form_submit(
            form,
            lambda data: generation.generation_start(
                project=access.project, created_by=request.user, **data
            ),
        )
        if row is not None:
            return see_other_page(request, "environments:generation", row.pk)
    else:
        form = GenerateForm()
    template = "environments/generate.html" + ("#form" if request.htmx else "")
    return render(request, template, {"form": form}, status=form_status(form))


@login_required
def generation_detail(request, generation_id: str):
    """The generation's progress while it runs (polled), then its tasks in the editor."""
    access = access_for_request(request)
    row = generation.generation_check_stale(
        generation=access.get(EnvironmentGeneration, pk=generation_id)
    )
    context = _editor_context(
        title="Review the generated tasks",
        generation=row,
        action_url=reverse("environments:generation", args=[row.pk]),
        preset=row.preset,
    )
    if request.method == "POST" and row.status == EnvironmentGeneration.Status.SUCCEEDED:
        access.require_write()

        def save(name, description, tasks, post):
            environment, harness = generation.generation_save(
                generation=row,
                name=name,
                description=description,
                tasks=tasks,
                preset=post.get("preset", ""),
                created_by=request.user,
            )
            if harness is not None:
                messages.success(
                    request, f"Environment {environment.name} and harness {harness.name} created."
                )
            else:
                messages.success(request, f"Environment {environment.name} created.")
            return see_other_page(request, "environments:detail", environment.pk)

        return _editor(request, context, save)
    if row.status != EnvironmentGeneration.Status.SUCCEEDED or row.environment_id:
        template = "environments/generation.html"
        if request.htmx:
            template += "#progress"
        return render(request, template, {"generation": row})
    context.update(
        rows=editor.rows_from_tasks(row.tasks),
        name=row.name,
        description=row.description,
    )
    if request.htmx and request.GET.get("poll"):
        return HttpResponseClientRedirect(request.path)  # done: show the preview page
    return _editor_response(request, context)
