"""Pictures where people look, in a real browser under `make up`'s settings (DEBUG on):
score charts with a no-script table, runs compared, the span tree and its waterfall, the 404."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import Run
from traces.models import Session, Span

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def debug_like_make_up(settings):
    settings.DEBUG = True  # scripts/up.sh serves with DEBUG=1


def scored_run(owner, harness, model: str, score: float, days_ago: int, **fields) -> Run:
    done = timezone.now() - timedelta(days=days_ago)
    return Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        model=model,
        status="succeeded",
        score=score,
        created_at=done - timedelta(minutes=3),
        started_at=done - timedelta(minutes=2),
        finished_at=done,
        **fields,
    )


@pytest.fixture
def charted(owner, make_harness):
    harness = make_harness(name="charted")
    runs = [
        scored_run(owner, harness, "m/one", 0.5, 3),
        scored_run(owner, harness, "m/one", 0.75, 2),
        scored_run(owner, harness, "m/two", 0.25, 1),
    ]
    return harness, runs


CHART_STATE = """() => {
  const canvas = document.querySelector("canvas[data-score-chart]");
  const source = JSON.parse(document.getElementById(canvas.dataset.scoreChart).textContent);
  const chart = Chart.getChart(canvas);
  const lines = (datasets) => datasets.map((d) => ({
    label: d.label, points: (d.data || d.points).map((p) => [p.run, p.y]),
  }));
  return {
    json: lines(source.series),
    drawn: lines(chart.data.datasets),
    tableOpen: canvas.closest("figure").querySelector("details.chart-data").open,
  };
}"""


def test_the_harness_page_draws_the_score_chart_from_its_runs(signed_in_page, charted):
    page = signed_in_page
    harness, (a1, a2, a3) = charted
    page.goto(f"/harnesses/{harness.pk}/")
    canvas = page.locator("#harness-chart canvas")
    expect(canvas).to_be_visible()  # pulled in with the runs partial, then drawn

    state = page.evaluate(CHART_STATE)
    expected = [
        {"label": "m/one", "points": [[a1.pk, 0.5], [a2.pk, 0.75]]},
        {"label": "m/two", "points": [[a3.pk, 0.25]]},
    ]
    assert state["json"] == expected and state["drawn"] == expected
    assert state["tableOpen"] is False  # the points table folds away once the chart is drawn
    box = canvas.bounding_box()
    assert box["width"] > 300 and box["height"] > 150
    summary = page.locator("#harness-chart table.score-summary")
    expect(summary).to_contain_text("0.750")  # best of m/one
    expect(summary.locator(f'[data-latest="{a3.pk}"]')).to_have_text("0.250")


# The canvas's colour just above a point's top (on its error bar) and as far above a point
# without one (0.13 above: between the grid lines), in device pixels: alpha 0 is no bar drawn.
BAR_PIXELS = """() => {
  const canvas = document.querySelector("#harness-chart canvas");
  const chart = Chart.getChart(canvas), meta = chart.getDatasetMeta(0), y = chart.scales.y;
  const ratio = canvas.width / canvas.clientWidth, ctx = canvas.getContext("2d");
  const alpha = (i, value) => ctx.getImageData(
    Math.round(meta.data[i].x * ratio), Math.round(y.getPixelForValue(value) * ratio), 1, 1
  ).data[3];
  const points = chart.data.datasets[0].data;
  return {
    plugin: chart.config.plugins.map((p) => p.id),
    bar: alpha(0, points[0].y + 0.13),
    none: alpha(1, points[1].y + 0.13),
  };
}"""


def test_the_score_chart_draws_each_runs_95_percent_interval_as_an_error_bar(
    signed_in_page, owner, make_harness
):
    page = signed_in_page
    harness = make_harness(name="barred")
    scored_run(owner, harness, "m/one", 0.5, 3, score_stderr=0.1, score_ci_low=0.304,
               score_ci_high=0.696, n_tasks=25)  # fmt: skip
    scored_run(owner, harness, "m/one", 0.25, 1)  # no per-task results: no bar
    page.goto(f"/harnesses/{harness.pk}/")
    expect(page.locator("#harness-chart canvas")).to_be_visible()
    pixels = page.evaluate(BAR_PIXELS)
    assert "belvedirErrorBars" in pixels["plugin"]
    assert pixels["bar"] > 0 and pixels["none"] == 0
    table = page.locator("#harness-chart details.chart-data table")
    expect(table).to_contain_text("0.500 ± 0.100 (95% CI 0.304–0.696)")


def test_my_benchmarks_charts_every_harness_and_redraws_when_filtered(
    signed_in_page, owner, charted, make_harness
):
    page = signed_in_page
    harness, _ = charted
    other = scored_run(owner, make_harness(name="other"), "m/one", 0.9, 1)
    page.goto("/runs/")
    expect(page.locator("#runs-chart canvas")).to_be_visible()
    labels = "() => Chart.getChart(document.querySelector('#runs-chart canvas')).data.datasets.map((d) => d.label)"
    assert page.evaluate(labels) == ["charted · m/one", "charted · m/two", "other · m/one"]

    page.select_option("select[name=harness]", harness.pk)  # htmx swaps the table and chart
    expect(page.locator(f'a:text-is("{other.pk}")')).to_have_count(0)
    expect(page.locator("#runs-chart canvas")).to_be_visible()
    assert page.evaluate(labels) == ["m/one", "m/two"]


def test_without_javascript_the_scores_read_as_a_table(browser, live_server, owner, charted):
    harness, (a1, _, _) = charted
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto("/login/")
        page.fill("#id_username", "owner@example.com")
        page.fill("#id_password", "correct-horse-9")
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: "/login/" not in url)
        # The harness page cannot pull its runs in: its link leads to them.
        page.goto(f"/harnesses/{harness.pk}/")
        page.click("text=Runs of this harness →")
        page.wait_for_url(f"**/runs/?harness={harness.pk}")

        chart = page.locator("#runs-chart")
        expect(chart.locator("canvas")).to_be_hidden()
        table = chart.locator("details.chart-data table")
        expect(table).to_be_visible()
        expect(table.locator("tbody tr")).to_have_count(3)
        row = table.locator("tr", has=page.locator(f'a:text-is("{a1.pk}")'))
        expect(row).to_contain_text("0.500")
        expect(row).to_contain_text("m/one")
    finally:
        context.close()


def test_two_runs_picked_on_my_benchmarks_compare_side_by_side(signed_in_page, owner, charted):
    page = signed_in_page
    harness, (a1, a2, _) = charted
    for run, tasks in ((a1, {"add": True, "sub": False}), (a2, {"add": True, "sub": True})):
        run.results = {"score": run.score, "tasks": tasks}
        run.save(update_fields=["results"])
    session = Session.objects.create(
        project=owner.project, external_id=a1.pk, run=a1, input_tokens=100, output_tokens=23
    )
    assert session.total_tokens == 123

    page.goto("/runs/")
    page.check(f'input[name=run][value="{a1.pk}"]')
    page.check(f'input[name=run][value="{a2.pk}"]')
    page.click("#compare-button")
    page.wait_for_url(re.compile(r"/runs/compare/\?run=run_\w+&run=run_\w+$"))

    table = page.locator("#compare-table")
    expect(table.locator("thead th")).to_have_count(3)
    expect(page.locator(f'#compare-score td[data-run="{a1.pk}"]')).to_have_text("0.500")
    expect(page.locator(f'#compare-score td[data-run="{a2.pk}"]')).to_have_text("0.750")
    expect(page.locator("#compare-duration")).to_contain_text("2 min 0 s")
    # Tokens come from the traces app's partial, one per run.
    expect(page.locator(f'#compare-tokens td[data-run="{a1.pk}"]')).to_contain_text("123 tokens")
    expect(page.locator(f'#compare-tokens td[data-run="{a2.pk}"]')).to_contain_text("no traces")
    # Columns in the list's order (newest first); per task, each run's result.
    expect(table.locator("thead th a")).to_have_text([a2.pk, a1.pk])
    sub = page.locator("#compare-tasks tr", has=page.locator('th:text-is("sub")'))
    expect(sub.locator("td")).to_have_text(["pass", "fail"])


@pytest.fixture
def traced_session(owner):
    session = Session.objects.create(project=owner.project, external_id="tree-session")
    t0 = timezone.now() - timedelta(minutes=1)

    def span(span_id: str, parent: str, name: str, start_ms: int, end_ms: int) -> Span:
        return Span.objects.create(
            project=owner.project,
            session=session,
            trace_id="a" * 32,
            span_id=span_id,
            parent_span_id=parent,
            name=name,
            start_time=t0 + timedelta(milliseconds=start_ms),
            end_time=t0 + timedelta(milliseconds=end_ms),
            duration_ms=end_ms - start_ms,
        )

    span("0000000000000001", "", "root workflow", 0, 1000)
    span("0000000000000002", "0000000000000001", "child task", 100, 600)
    span("0000000000000003", "0000000000000002", "grandchild call", 200, 400)
    span("0000000000000004", "", "second root", 800, 1000)
    session.span_count = 4
    session.save(update_fields=["span_count"])
    return session


def test_folding_a_span_hides_its_children_and_the_waterfall_places_each_span(
    signed_in_page, traced_session
):
    page = signed_in_page
    page.goto(f"/traces/sessions/{traced_session.pk}/")
    tree = page.locator("#span-tree")
    child = tree.locator("summary", has_text="child task").first
    grandchild = tree.locator("summary", has_text="grandchild call")
    expect(child).to_be_visible()
    expect(grandchild).to_be_visible()

    tree.locator("summary", has_text="root workflow").click()
    expect(child).to_be_hidden()
    expect(grandchild).to_be_hidden()
    expect(tree.locator("summary", has_text="second root")).to_be_visible()

    tree.locator("summary", has_text="root workflow").click()
    expect(grandchild).to_be_visible()

    bars = tree.locator(".waterfall .bar")
    expect(bars).to_have_count(4)
    lanes = page.evaluate(
        """() => [...document.querySelectorAll('#span-tree .waterfall')].map((lane) => {
          const l = lane.getBoundingClientRect(), b = lane.querySelector('.bar').getBoundingClientRect();
          return [(b.left - l.left) / l.width, b.width / l.width, l.left];
        })"""
    )
    # Start and length as a share of the session's 1 s: root 0–1, child .1–.6, grandchild .2–.4.
    expected = [(0, 1), (0.1, 0.5), (0.2, 0.2), (0.8, 0.2)]
    for (start, width, _), (want_start, want_width) in zip(lanes, expected, strict=True):
        assert start == pytest.approx(want_start, abs=0.01)
        assert width == pytest.approx(want_width, abs=0.01)
    assert len({round(left) for *_, left in lanes}) == 1  # one timeline: the lanes line up


def test_an_unknown_page_with_debug_on_is_the_site_s_404_without_the_url_list(signed_in_page):
    page = signed_in_page
    response = page.goto("/no/such/page/")
    assert response.status == 404
    expect(page.locator("h1")).to_have_text("Page not found")
    expect(page.locator("header.top nav")).to_contain_text("My Benchmarks")  # the site's header
    content = page.content()
    assert "URLconf" not in content and "api/v1/" not in content and "DEBUG" not in content
    assert page.locator('link[rel="icon"]').get_attribute("href") == "/static/favicon.svg"
