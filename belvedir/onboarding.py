"""A new project's next steps (create a key, add a harness, launch a run, send traces).

The home page lists them; whether a step is done is known by the app that owns it, so each
higher app answers its own step as a fragment (`?fragment=onboarding-step` on its list page,
pulled in with `hx-get`) through `step_response`.
"""

from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

FRAGMENT = "onboarding-step"


@dataclass(frozen=True)
class Step:
    slug: str
    title: str
    text: str
    url_name: str  # where the user does it
    # The page whose `onboarding-step` fragment says whether it is done; None: the core knows.
    status_url_name: str | None
    anchor: str = ""

    @property
    def url(self) -> str:
        return reverse(self.url_name) + (f"#{self.anchor}" if self.anchor else "")

    @property
    def status_url(self) -> str:
        return (
            f"{reverse(self.status_url_name)}?fragment={FRAGMENT}" if self.status_url_name else ""
        )


STEPS = (
    Step(
        "key",
        "Create an API key",
        "A project key lets the CLI, the REST API and the SDK act in this project.",
        "project-settings",
        None,
    ),
    Step(
        "harness",
        "Add a harness from the catalog",
        "Pick a catalog card (SWE-bench, Terminal-Bench, your own tasks…) or point at your repo.",
        "harnesses:new",
        "harnesses:list",
    ),
    Step(
        "run",
        "Launch a run",
        "Open a harness and press New benchmark: pick the model, attempts and grading.",
        "runs:new",
        "runs:list",
    ),
    Step(
        "traces",
        "Send traces",
        "Runs trace themselves; from your own app, initialize the SDK with your key.",
        "project-settings",
        "traces:sessions",
        anchor="key-usage",
    ),
)
_BY_SLUG = {step.slug: step for step in STEPS}


def step_response(request: HttpRequest, *, slug: str, done: bool) -> HttpResponse:
    """One step of the checklist, ticked when `done` (the fragment the home page pulls in)."""
    context = {"step": _BY_SLUG[slug], "done": done, "lazy": False}
    return render(request, "belvedir/_onboarding_step.html", context)


def is_fragment(request: HttpRequest) -> bool:
    return bool(getattr(request, "htmx", False)) and request.GET.get("fragment") == FRAGMENT


def home_steps(*, has_key: bool) -> list[dict]:
    """The checklist as the home page renders it: the core's own step is known, the others
    load from their apps."""
    return [
        {"step": step, "done": has_key, "lazy": False}
        if step.status_url_name is None
        else {"step": step, "done": False, "lazy": True}
        for step in STEPS
    ]
