"""Pages and list APIs at scale: p50/p95 per page over 100k runs and 1M spans.

    .venv/bin/python bench/scale.py [--samples 40] [--keep-db] [--reuse-db] [--explain-misses]
                                    [--db NAME] [--pages TEXT ...]

* Data (bench/_scale_data.py, bulk `INSERT ... SELECT generate_series`): 50 organizations,
  100,000 runs (20,000 in the measured project, 2,000 of one harness), 20,000 sessions,
  1,000,000 spans with one session of 10,000 spans, 5 fine-tuned models. Database
  `belvedir_bench_scale` or --db (created by migrating, dropped at the end unless --keep-db;
  --reuse-db measures a kept one again without seeding, and seeds it first if it is missing).
* Server: a real `gunicorn belvedir.wsgi` process (one worker, DEBUG off) on 127.0.0.1, as in
  bench/ingest.py; pages with the owner's session cookie, APIs with a project key, HTMX
  partials with `HX-Request: true` as the browser sends them.
* Per page: 3 warm-up requests, then --samples timed ones (one client, sequential); p50 and
  p95 of the wall time of the whole answer; PASS/MISS against p95 <= 100 ms. For every page
  (only the MISSes with --explain-misses) the EXPLAIN (ANALYZE, BUFFERS) of its slowest query,
  which shows the index it uses.
  --pages measures only the pages whose label contains one of the given texts.

Exits 0 unless something errored (a page answering other than 200, the server not starting).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _common
from _common import table
from ingest import Server

# The app's packages before bench/'s scripts (bench/router.py would shadow the router app).
sys.path.insert(0, str(_common.ROOT))

DB_NAME = "belvedir_bench_scale"
TARGET_MS = 100
WARMUP = 3


def pages(ids: dict) -> list[tuple[str, str, bool]]:
    """(label, path, is_htmx) per measured page."""
    harness, run, ftm, big = ids["harness"], ids["run"], ids["fine_tuned"], ids["big_session"]
    return [
        ("My Benchmarks, first page", "/runs/", False),
        ("My Benchmarks, page 400", "/runs/?page=400", False),
        ("My Benchmarks ?harness", f"/runs/?harness={harness}", False),
        ("My Benchmarks ?status=failed", "/runs/?status=failed", False),
        ("My Benchmarks ?model", "/runs/?model=qwen2.5-7b", False),
        ("My Benchmarks ?model=fine-tuned", f"/runs/?model={ftm}", False),
        (
            "My Benchmarks, all filters",
            f"/runs/?harness={harness}&status=succeeded&model=gpt-4o-mini",
            False,
        ),
        ("Harness page (2,000 runs)", f"/harnesses/{harness}/", False),
        ("Harness runs + chart (partial)", f"/runs/?harness={harness}&fragment=harness-runs", True),
        ("Harness leaderboard (partial)", f"/scores/harnesses/{harness}/leaderboard/", True),
        ("Harness leaderboard, best", f"/scores/harnesses/{harness}/leaderboard/?pick=best", False),
        ("API harness leaderboard", f"/api/v1/harnesses/{harness}/leaderboard", False),
        (
            "Environment leaderboard (partial, 3 harnesses)",
            f"/scores/environments/{ids['environment']}/leaderboard/",
            True,
        ),
        (
            "API environment leaderboard ?pick=best",
            f"/api/v1/environments/{ids['environment']}/leaderboard?pick=best",
            False,
        ),
        ("Run page", f"/runs/{run}/", False),
        ("Run trace summary (partial)", f"/traces/?fragment=run-summary&run={run}", True),
        ("Sessions list", "/traces/", False),
        ("Sessions list, page 100", "/traces/?page=100", False),
        ("Sessions ?outcome=fail", "/traces/?outcome=fail", False),
        ("Sessions ?model&since", "/traces/?model=llama-3.1-8b&since=2020-01-01T00:00:00Z", False),
        ("Session page (10,000 spans)", f"/traces/sessions/{big}/", False),
        (
            "Session page, Load more at span 9,800 (partial)",
            f"/traces/sessions/{big}/?after={ids['span_cursor']}&shown=9800&fragment=spans",
            True,
        ),
        ("Session page, a span's details (partial)", ids["span_details"], True),
        ("Models page", "/models/", False),
        ("Model View benchmarks (partial)", f"/runs/?fragment=model-benchmarks&model={ftm}", True),
        ("API model benchmarks", f"/api/v1/models/{ftm}/benchmarks", False),
        ("API runs", "/api/v1/runs", False),
        ("API runs ?offset=19000", "/api/v1/runs?offset=19000", False),
        ("API runs ?harness&status", f"/api/v1/runs?harness={harness}&status=failed", False),
        ("API sessions", "/api/v1/sessions", False),
        ("API sessions ?outcome", "/api/v1/sessions?outcome=success", False),
        ("API session (10,000 spans)", f"/api/v1/sessions/{big}", False),
        ("API harnesses", "/api/v1/harnesses", False),
        ("API fine-tuned models", "/api/v1/models/fine-tuned", False),
        ("API task groups", "/api/v1/task-groups", False),
    ]


def session_page_ids(session_id: str, deep: int = 9_800) -> dict:
    """A "Load more" cursor deep into the big session (its `deep`th span) and an LLM span's
    details URL there."""
    from django.urls import reverse

    from traces.models import Span
    from traces.selectors import SpanCursor

    spans = Span.objects.filter(session_id=session_id).order_by("start_time", "id")
    llm = spans.filter(is_llm=True).first()
    return {
        "span_cursor": str(SpanCursor.of(spans[deep - 1])),
        "span_details": reverse("traces:span", args=[session_id, llm.pk]),
    }


def leaderboard_ids(project) -> dict:
    """An environment at version 2 that three of the project's harnesses were made from (about
    6,000 runs): harness 0 and 2 took v2, harness 1 v1. Kept across --reuse-db."""
    from harnesses.models import Environment, Harness

    environment, _ = Environment.objects.get_or_create(
        project=project, name="Scale tasks", defaults={"version": 2}
    )
    for number, version in ((0, 2), (1, 1), (2, 2)):
        Harness.objects.filter(pk=f"har_s0_{number}").update(
            environment=environment, environment_version=version
        )
    return {"environment": environment.pk}


def explain_slowest(client, key: str, path: str, htmx: bool) -> None:
    """The page once more in this process (Django test client): its query count, time in SQL,
    and the EXPLAIN (ANALYZE, BUFFERS) of its slowest query."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    headers = {"HX-Request": "true"} if htmx else {}
    if path.startswith("/api/"):
        headers["Authorization"] = f"Bearer {key}"
    with CaptureQueriesContext(connection) as captured:
        t0 = time.perf_counter()
        client.get(path, headers=headers)
        total = (time.perf_counter() - t0) * 1000
    queries = captured.captured_queries
    in_sql = sum(float(q["time"]) for q in queries) * 1000
    print(f"{len(queries)} queries, {in_sql:.1f} ms in SQL of {total:.1f} ms (in-process)")
    slowest = max(queries, key=lambda q: float(q["time"]), default=None)
    if slowest is None or not slowest["sql"].lstrip().upper().startswith("SELECT"):
        return
    print(f"slowest ({float(slowest['time']) * 1000:.1f} ms): {slowest['sql'][:400]}")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + slowest["sql"].replace("%", "%%"))
        print("\n".join(row[0] for row in cursor.fetchall()))


def wait_ready(server: Server, timeout: float = 120) -> None:
    """Until the server answers (its first request imports the app: slow on a busy machine)."""
    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {server.log_path.read_text()[-2000:]}")
        try:
            requests.get(f"{server.url}/api/v1/traces", timeout=30)
            return
        except requests.RequestException:
            time.sleep(0.5)
    raise RuntimeError(f"gunicorn did not answer within {timeout} s")


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def measure(http, url: str, path: str, htmx: bool, samples: int) -> tuple[list[float], int]:
    headers = {"HX-Request": "true"} if htmx else {}
    times = []
    size = 0
    for i in range(WARMUP + samples):
        t0 = time.perf_counter()
        response = http.get(url + path, headers=headers, timeout=60, allow_redirects=False)
        elapsed = time.perf_counter() - t0
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: {response.status_code} {response.text[:300]}")
        size = len(response.content)
        if i >= WARMUP:
            times.append(elapsed * 1000)
    return times, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument(
        "--explain-misses", action="store_true", help="EXPLAIN only the pages that miss"
    )
    parser.add_argument(
        "--reuse-db", action="store_true", help="measure a database kept by --keep-db again"
    )
    parser.add_argument(
        "--db", default=DB_NAME, help=f"the database's name ({DB_NAME}); one per person measuring"
    )
    parser.add_argument(
        "--pages",
        nargs="+",
        metavar="TEXT",
        help='only the pages whose label contains one of these, e.g. "Session page" "API session"',
    )
    args = parser.parse_args()

    import requests

    db_name = args.db
    reuse = args.reuse_db and _common.database_exists(db_name)
    if args.reuse_db and not reuse:
        print(f"no database {db_name} to reuse: seeding it (and keeping it)", flush=True)
    url = f"{_common.PG_URL}/{db_name}" if reuse else _common.database_recreate(db_name)
    server = None
    tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    try:
        t0 = time.perf_counter()
        _common.django_setup(url)
        print(f"migrated in {time.perf_counter() - t0:.1f} s", flush=True)
        import _scale_data
        from django.db import connection
        from django.test import Client

        from belvedir import services

        t0 = time.perf_counter()
        ids = _scale_data.existing() if reuse else _scale_data.seed()
        ids |= session_page_ids(ids["big_session"])
        ids |= leaderboard_ids(ids["project"])
        for step, seconds in ids["timings"].items():
            print(f"  seeded {step:24s} {seconds:6.1f} s", flush=True)
        print(f"seeded in {time.perf_counter() - t0:.1f} s", flush=True)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_size_pretty(pg_database_size(current_database()))")
            print(f"database size {cursor.fetchone()[0]}")

        client = Client()
        client.force_login(ids["user"])
        _, key = services.api_key_create(project=ids["project"], name="scale bench")

        server = Server(url, threads=4, log_path=tmp / "gunicorn.log")
        wait_ready(server)
        web = requests.Session()
        web.cookies.set("sessionid", client.cookies["sessionid"].value)
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {key}"

        rows, explained = [], []
        measured = [
            page
            for page in pages(ids)
            if not args.pages or any(text.lower() in page[0].lower() for text in args.pages)
        ]
        if not measured:
            raise RuntimeError(f"no page's label contains any of {args.pages}")
        for label, path, htmx in measured:
            http = api if path.startswith("/api/") else web
            times, size = measure(http, server.url, path, htmx, args.samples)
            p50, p95 = statistics.median(times), percentile(times, 95)
            verdict = "PASS" if p95 <= TARGET_MS else "MISS"
            rows.append([label, f"{p50:.1f}", f"{p95:.1f}", f"{size // 1024}", verdict])
            print(f"{verdict} {label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms", flush=True)
            if verdict == "MISS" or not args.explain_misses:
                explained.append((label, path, htmx))
        print()
        print(f"p50/p95 over {args.samples} sequential requests each, after {WARMUP} warm-up:")
        print(table(rows, ["page", "p50 ms", "p95 ms", "KB", f"p95<={TARGET_MS}"]))
        for label, path, htmx in explained:
            print(f"\n--- {label} ({path}):")
            explain_slowest(client, key, path, htmx)
        load = Path("/proc/loadavg").read_text().split()[:3]
        print(f"\nload average at the end: {' '.join(load)} (2 cores, shared machine)")
        print(f"{sum(r[4] == 'PASS' for r in rows)}/{len(rows)} pages PASS")
        return 0
    finally:
        if server is not None:
            server.stop()
        if args.keep_db or args.reuse_db:
            print(f"kept database {db_name}")
        else:
            _common.database_drop(db_name)


if __name__ == "__main__":
    sys.exit(main())
