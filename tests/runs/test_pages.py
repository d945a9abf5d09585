"""The run page and My Benchmarks: what people look at."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run

pytestmark = pytest.mark.django_db

LOG = "installing contract-harness\nboom <script>alert(1)</script>\n"


@pytest.fixture
def finished(make_run):
    now = timezone.now()
    return make_run(
        status="failed",
        score=None,
        model="acme/model-1",
        notes=["belvedir: the run command exited with code 3."],
        log_tail=LOG,
        log_size=len(LOG),
        exit_code=3,
        created_at=now - timedelta(minutes=2),
        started_at=now - timedelta(minutes=2),
        finished_at=now - timedelta(minutes=1),
    )


def test_the_run_page_shows_status_score_notes_and_log(owner, finished, make_run):
    html = owner.web.get(f"/runs/{finished.pk}/").content.decode()
    assert "<html" in html
    assert 'id="run-status">failed<' in html
    assert "belvedir: the run command exited with code 3." in html
    assert "installing contract-harness" in html
    assert "<script>alert(1)</script>" not in html  # the log is escaped
    assert "&lt;script&gt;" in html
    assert "acme/model-1" in html

    scored = make_run(status="succeeded", score=0.85, results={"score": 0.85, "passed": 17})
    html = owner.web.get(f"/runs/{scored.pk}/").content.decode()
    assert 'id="run-score">0.850<' in html
    assert "passed" in html


def test_the_run_page_answers_htmx_with_only_the_live_fragment(owner, finished):
    response = owner.web.get(f"/runs/{finished.pk}/", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="run-live"')
    assert "<html" not in html and "<h1" not in html
    assert 'id="run-status">failed<' in html and "run-log" not in html


def test_the_run_page_answers_htmx_for_its_log_with_only_the_log_fragment(owner, finished):
    response = owner.web.get(f"/runs/{finished.pk}/?fragment=log", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="run-log-box"')
    assert "installing contract-harness" in html and 'id="run-status"' not in html


def test_the_run_page_is_hidden_from_outsiders_and_read_only_for_readers(
    owner, readonly, outsider, make_run
):
    run = make_run(status="running")
    assert outsider.web.get(f"/runs/{run.pk}/").status_code == 404
    assert "Cancel run</button>" in owner.web.get(f"/runs/{run.pk}/").content.decode()
    page = readonly.web.get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    assert "Cancel run</button>" not in page.content.decode()
    assert readonly.web.post(f"/runs/{run.pk}/cancel/").status_code == 403
    assert outsider.web.post(f"/runs/{run.pk}/cancel/").status_code == 404
    run.refresh_from_db()
    assert run.status == "running"


def test_cancelling_from_the_page_marks_the_run_cancelled(owner, make_run):
    run = make_run(status="queued")
    response = owner.web.post(f"/runs/{run.pk}/cancel/")
    assert response.status_code == 303 and response["Location"] == f"/runs/{run.pk}/"
    run.refresh_from_db()
    assert run.status == "cancelled"


def test_my_benchmarks_lists_runs_with_status_badges_and_scores(owner, outsider, make_run):
    make_run(status="succeeded", score=0.85, model="acme/model-1")
    make_run(status="failed", model="acme/model-2")
    make_run(status="running")
    theirs = make_run(project=outsider.project, status="succeeded")
    html = owner.web.get("/runs/").content.decode()
    assert '<span class="badge succeeded">succeeded</span>' in html
    assert '<span class="badge failed">failed</span>' in html
    assert '<span class="badge running">running</span>' in html
    assert "0.850" in html and "acme/model-2" in html
    assert theirs.pk not in html


def test_my_benchmarks_filters_by_harness_status_and_model(owner, make_harness, make_run):
    a, b = make_harness(name="alpha"), make_harness(name="beta")
    r1 = make_run(harness=a, status="succeeded", model="m1")
    r2 = make_run(harness=a, status="failed", model="m2")
    r3 = make_run(harness=b, status="succeeded", model="m1")

    def listed(**params):
        html = owner.web.get("/runs/", params).content.decode()
        return {r.pk for r in (r1, r2, r3) if r.pk in html}

    assert listed() == {r1.pk, r2.pk, r3.pk}
    assert listed(harness=a.pk) == {r1.pk, r2.pk}
    assert listed(status="failed") == {r2.pk}
    assert listed(model="m1") == {r1.pk, r3.pk}
    assert listed(harness=b.pk, status="failed") == set()
    assert listed(status="nonsense") == {r1.pk, r2.pk, r3.pk}


def test_my_benchmarks_answers_its_filter_form_with_the_table_fragment(owner, make_run):
    run = make_run(status="failed")
    response = owner.web.get(
        "/runs/", {"status": "failed", "fragment": "table"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="run-table">')
    assert "<html" not in html and run.pk in html


def test_my_benchmarks_shows_25_runs_a_page(owner, make_run):
    now = timezone.now()
    runs = [make_run(status="succeeded", created_at=now - timedelta(minutes=i)) for i in range(30)]
    first = owner.web.get("/runs/").content.decode()
    second = owner.web.get("/runs/", {"page": 2}).content.decode()
    assert sum(r.pk in first for r in runs) == 25
    assert sum(r.pk in second for r in runs) == 5
    assert all(r.pk in first for r in runs[:25])  # newest first
    assert "Page 1 of 2" in first and "page=2" in first
    assert "Page 2 of 2" in second


def test_my_benchmarks_needs_a_sign_in(client):
    response = client.get("/runs/")
    assert response.status_code == 302 and "/login/" in response["Location"]


@pytest.mark.docker
def test_my_benchmarks_new_benchmark_picks_a_harness_and_launches(
    owner, make_harness, django_capture_on_commit_callbacks
):
    harness = make_harness(name="picked")
    page = owner.web.get("/runs/new/")
    assert page.status_code == 200 and b"picked" in page.content
    with django_capture_on_commit_callbacks(execute=False):
        response = owner.web.post(
            "/runs/new/", {"harness": harness.pk, "attempts": 2, "grading": "mean"}
        )
    run = Run.objects.get(harness=harness)
    assert response.status_code == 303 and response["Location"] == f"/runs/{run.pk}/"
    assert (run.attempts, run.grading) == (2, "mean")


@pytest.mark.docker
def test_launching_with_htmx_sends_the_browser_to_the_new_run(
    owner, make_harness, django_capture_on_commit_callbacks
):
    harness = make_harness(name="dialog")
    with django_capture_on_commit_callbacks(execute=False):
        response = owner.web.post(
            f"/runs/launch/{harness.pk}/",
            {"attempts": 1, "grading": "pass@1"},
            HTTP_HX_REQUEST="true",
        )
    run = Run.objects.get(harness=harness)
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/runs/{run.pk}/"
    assert "Location" not in response


def test_my_benchmarks_new_benchmark_refuses_another_organizations_harness(
    owner, outsider, make_harness
):
    harness = make_harness(name="theirs")
    response = outsider.web.post(
        "/runs/new/", {"harness": harness.pk, "attempts": 1, "grading": "pass@1"}
    )
    assert response.status_code == 400
    assert not Run.objects.exists()


def test_the_log_fragment_is_empty_while_the_log_has_not_grown_and_whole_once_it_has(
    owner, make_run
):
    run = make_run(status="running", log_tail="one\n", log_size=4)
    url = f"/runs/{run.pk}/?fragment=log"
    assert owner.web.get(f"{url}&size=4", HTTP_HX_REQUEST="true").status_code == 204
    Run.objects.filter(pk=run.pk).update(log_tail="one\ntwo\n", log_size=8)
    grown = owner.web.get(f"{url}&size=4", HTTP_HX_REQUEST="true")
    assert grown.status_code == 200 and "one\ntwo" in grown.content.decode()
    assert "size=8" in grown.content.decode()  # the next poll asks from there
    Run.objects.filter(pk=run.pk).update(status="succeeded")
    ended = owner.web.get(f"{url}&size=8", HTTP_HX_REQUEST="true")
    assert ended.status_code == 200 and "every 1s" not in ended.content.decode()


def test_the_run_page_shows_stages_and_the_configuration_with_secrets_masked(owner, make_run):
    from harnesses import env_secrets

    run = make_run(
        status="running",
        stage="installing",
        stage_started_at=timezone.now() - timedelta(seconds=5),
        started_at=timezone.now() - timedelta(seconds=9),
        harness_snapshot={"name": "Smoke", "run_command": "python run.py", "env": {"A": "1"}},
        harness_env_secrets_encrypted=env_secrets.secrets_encrypt({"HF_TOKEN": "hf_secret_1"}),
    )
    html = owner.web.get(f"/runs/{run.pk}/").content.decode()
    assert 'aria-current="step">Installing <span class="muted">5.' in html
    assert "running for 9." in html
    assert f"HF_TOKEN={env_secrets.MASK}" in html and "hf_secret_1" not in html
