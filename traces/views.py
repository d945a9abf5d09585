"""Trace pages: sessions, a session as a span tree, tasks, task groups."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import Truncator

from belvedir import onboarding
from belvedir.access import access_for_request
from belvedir.errors import DomainError
from runs.models import Run
from traces import selectors
from traces.models import Session, Span, TaskGroup


@login_required
def session_list(request):
    access = access_for_request(request)
    q = request.GET
    if onboarding.is_fragment(request):  # the home page's "send traces" step
        done = Session.objects.filter(project=access.project).exists()
        return onboarding.step_response(request, slug="traces", done=done)
    if request.htmx and q.get("fragment") in ("run-summary", "run-tokens"):
        # The run page (run-summary) and the run comparison (run-tokens, one per run) pull
        # this in (`hx-get`, `hx-trigger="load"`).
        run = access.get(Run, pk=q.get("run") or "")
        context = {"run": run, "trace": selectors.run_trace_summary(run)}
        return render(request, f"traces/sessions.html#{q['fragment']}", context)
    error, status = None, 200
    try:
        sessions = selectors.sessions_for(
            project=access.project,
            run=q.get("run"),
            outcome=q.get("outcome"),
            model=q.get("model"),
            since=q.get("since"),
            until=q.get("until"),
        )
    except DomainError as exc:
        # A filter that cannot be applied shows no rows rather than every session unfiltered.
        error, status = exc.message, 400
        sessions = Session.objects.none()
    page = Paginator(sessions, 25).get_page(q.get("page"))
    context = {"page": page, "filters": q, "filter_error": error}
    if request.htmx and q.get("fragment") == "table":
        return render(request, "traces/sessions.html#session-table", context, status=status)
    return render(request, "traces/sessions.html", context, status=status)


@login_required
def session_detail(request, session_id: str):
    """The session with a page of its span tree (SPAN_PAGE spans, no message bodies: a span's
    details load when it is opened). `?after=<cursor>` starts after a span (keyset, what
    "Load more" asks for); with `fragment=spans` (htmx) only that page's rows and the next
    "Load more". A cursor that is not one shows the first page, like a bad `?page=`."""
    access = access_for_request(request)
    q = request.GET
    session = access.get(Session.objects.select_related("run"), pk=session_id)
    after = selectors.SpanCursor.parse(q.get("after"))
    # How many spans earlier pages showed: only for the "Spans 201–400 of N" line.
    raw_shown = q.get("shown", "")
    shown = int(raw_shown) if after and raw_shown.isdigit() and len(raw_shown) < 10 else 0
    span_page = selectors.session_span_page(session, after)
    # One reverse() for every row's link (they differ only in the span's pk).
    span_url = reverse("traces:span", kwargs={"session_id": session.pk, "span_pk": 0})
    context = {
        "session": session,
        "span_page": span_page,
        "span_tree": _span_tree(span_page.rows, span_url.removesuffix("0/")),
        "first": shown + 1,
        "last": shown + len(span_page.rows),
        "after": after,
    }
    if request.htmx and q.get("fragment") == "spans":
        return render(request, "traces/session.html#span-page", context)
    context["tasks"] = session.tasks.select_related("group")
    if session.run_id:  # a run's own-key calls through the router: its provider bills them
        context["provider_billed"] = selectors.provider_billed(session.spans.all(), run=session.run)
    return render(request, "traces/session.html", context)


def _span_tree(rows: list[dict], span_url_prefix: str) -> SafeString:
    """The rows of the session page's span tree (`selectors.span_rows`), built here in one
    pass: as template tags (some twenty per span) they were most of the page's time.

    Each span is a `<details open>` whose subtree follows inside it (`span-children`), so
    folding a span hides its children; its bar sits on the session's timeline (waterfall);
    its "Details" load from `span_detail` when opened (htmx), or open as a page without it.
    """
    html = []
    for row in rows:
        span = row["span"]
        url = f"{span_url_prefix}{span.pk}/"
        error = span.status_code == "error"
        tokens = ""
        if span.is_llm:
            tokens = format_html(
                " · {} in / {} out tokens",
                "?" if span.input_tokens is None else span.input_tokens,
                "?" if span.output_tokens is None else span.output_tokens,
            )
        html.append(
            format_html(
                '<details class="span" open data-span-id="{}" data-depth="{}">\n'
                '<summary>\n<span class="span-label">\n<strong>{}</strong>{}{}{}{}\n'
                '<span class="muted">{} ms{}</span>\n</span>\n'
                '<span class="waterfall" aria-hidden="true"><svg><rect class="bar{}{}" '
                'x="{}%" width="{}%" height="100%" rx="2"/></svg></span>\n</summary>\n'
                '<details class="span-more" hx-get="{}" hx-trigger="toggle once" '
                'hx-target="find .span-body"><summary class="muted">{}</summary>'
                '<div class="span-body"><a href="{}">Open the span</a></div></details>\n{}{}{}',
                span.span_id,
                row["depth"],
                span.name,
                format_html(' <span class="muted">in {}</span>', row["under"])
                if row["under"]
                else "",
                format_html(' <span class="badge">{}</span>', span.span_kind)
                if span.span_kind
                else "",
                format_html(
                    ' <span class="badge running">LLM · {}</span>{}',
                    span.model or "?",
                    mark_safe(
                        ' <span class="badge" title="The router recorded this call too: its '
                        'span counts, this one does not">duplicate</span>'
                    )
                    if span.duplicate_of_id
                    else "",
                )
                if span.is_llm
                else "",
                mark_safe(' <span class="badge failed">error</span>') if error else "",
                f"{span.duration_ms:.1f}",
                tokens,
                " llm" if span.is_llm else "",
                " error" if error else "",
                row["offset"],
                row["width"],
                url,
                "Messages and details" if span.is_llm else "Details",
                url,
                format_html('<p class="muted">{}</p>\n', Truncator(span.status_message).chars(300))
                if span.status_message
                else "",
                mark_safe('<div class="span-children">' if row["children"] else "</details>"),
                mark_safe("</div></details>" * len(row["closes"])),
            )
        )
    return mark_safe("\n".join(html))  # noqa: S308 (each row is format_html's)


@login_required
def span_detail(request, session_id: str, span_pk: int):
    """One span of the session in full: its LLM messages, status, attributes and events. The
    session page loads it (htmx) into a span when it is opened; without htmx, a page."""
    access = access_for_request(request)
    span = access.get(Span.objects.select_related("session"), pk=span_pk, session_id=session_id)
    context = {"span": span, "session": span.session}
    if request.htmx:
        return render(request, "traces/span.html#span-body", context)
    return render(request, "traces/span.html", context)


@login_required
def task_group_list(request):
    access = access_for_request(request)
    groups = selectors.task_groups_for(project=access.project)
    page = Paginator(groups, 25).get_page(request.GET.get("page"))
    return render(request, "traces/task_groups.html", {"page": page})


@login_required
def task_group_detail(request, group_id: str):
    access = access_for_request(request)
    group = access.get(TaskGroup, pk=group_id)
    page = Paginator(selectors.tasks_for(project=group.project, group=group.pk), 25).get_page(
        request.GET.get("page")
    )
    return render(request, "traces/task_group.html", {"group": group, "page": page})


@login_required
def task_list(request):
    access = access_for_request(request)
    tasks = selectors.tasks_for(project=access.project)
    page = Paginator(tasks, 25).get_page(request.GET.get("page"))
    return render(request, "traces/tasks.html", {"page": page})
