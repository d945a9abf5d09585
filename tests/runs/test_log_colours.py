"""Terminal colour codes in a run's log show as colours on the run page and are gone from its
download: never as raw "[31m" text (belvedir.ansi)."""

import pytest

from belvedir import ansi
from runs.models import Run

# What pytest, pip and rich print to a terminal: colours, bold, a cleared line, a title, a
# 256-colour and a true-colour escape, a cursor move.
COLOURED = (
    "\x1b[1m\x1b[32mPASSED\x1b[0m tests/test_a.py\n"
    "\x1b[31mFAILED\x1b[39m <b>x</b> & y\n"
    "\x1b]0;pip install\x07\x1b[2K\rDownloading 10%\x1b[1A\n"
    "\x1b[38;5;208morange\x1b[0m \x1b[38;2;1;2;3mrgb\x1b[m done\x1b"
)
PLAIN = "PASSED tests/test_a.py\nFAILED <b>x</b> & y\n\rDownloading 10%\norange rgb done"


def test_stripping_leaves_exactly_the_text_a_terminal_shows():
    assert ansi.plain_text(COLOURED) == PLAIN
    assert ansi.plain_text("no escapes\n") == "no escapes\n"


def test_colours_become_classes_and_the_text_stays_escaped():
    html = ansi.as_html(COLOURED)
    assert '<span class="ansi-fg-2 ansi-bold">PASSED</span> tests/test_a.py\n' in html
    assert '<span class="ansi-fg-1">FAILED</span> &lt;b&gt;x&lt;/b&gt; &amp; y\n' in html
    assert "\x1b" not in html and "[0m" not in html and "[31m" not in html
    assert "]0;" not in html and "38;5" not in html
    assert "orange rgb done" in html  # colours past the 16 basic ones show as plain text
    assert "style=" not in html  # the Content-Security-Policy allows no style attributes


def test_a_reset_bold_off_and_default_colour_end_their_spans():
    html = ansi.as_html("\x1b[1;33mwarn\x1b[22m still yellow\x1b[39m plain")
    assert html == (
        '<span class="ansi-fg-3 ansi-bold">warn</span>'
        '<span class="ansi-fg-3"> still yellow</span> plain'
    )


@pytest.fixture
def coloured_run(owner, harness) -> Run:
    return Run.objects.create(
        project=owner.project,
        harness=harness,
        harness_name=harness.name,
        status="succeeded",
        log_tail=COLOURED,
        log_size=len(COLOURED),
    )


def test_the_run_page_shows_the_log_in_colour_without_raw_escape_codes(owner, coloured_run):
    page = owner.web.get(f"/runs/{coloured_run.pk}/").content.decode()
    log = page[page.index('id="run-log"') : page.index("</pre>", page.index('id="run-log"'))]
    assert '<span class="ansi-fg-1">FAILED</span>' in log
    assert "\x1b" not in page and "[31m" not in log and "[0m" not in log


def test_the_log_fragment_the_page_polls_is_in_colour_too(owner, coloured_run):
    fragment = owner.web.get(
        f"/runs/{coloured_run.pk}/", {"fragment": "log"}, headers={"HX-Request": "true"}
    ).content.decode()
    assert '<span class="ansi-fg-2 ansi-bold">PASSED</span>' in fragment
    assert "\x1b" not in fragment


def test_the_downloaded_log_is_plain_text_without_escape_codes(owner, coloured_run):
    page = owner.web.get(f"/runs/{coloured_run.pk}/").content.decode()
    assert f'href="/runs/{coloured_run.pk}/log.txt"' in page

    response = owner.web.get(f"/runs/{coloured_run.pk}/log.txt")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="{coloured_run.pk}.log"'
    assert response.content.decode() == PLAIN


def test_a_truncated_logs_download_says_so_first(owner, coloured_run):
    coloured_run.log_size = 100_000
    coloured_run.save(update_fields=["log_size"])
    text = owner.web.get(f"/runs/{coloured_run.pk}/log.txt").content.decode()
    assert text == "… earlier output truncated, showing the last 16 KB\n" + PLAIN.split("\n", 1)[1]


def test_a_runs_log_is_downloaded_by_its_readers_only(readonly, outsider, coloured_run):
    assert readonly.web.get(f"/runs/{coloured_run.pk}/log.txt").status_code == 200
    assert outsider.web.get(f"/runs/{coloured_run.pk}/log.txt").status_code == 404
