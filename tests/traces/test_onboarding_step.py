"""The home page's "send traces" step is ticked once the project has received a trace."""

from tests.traces.helpers import body_of, llm_attributes, post_traces, span

HTMX = {"HTTP_HX_REQUEST": "true"}
URL = "/traces/?fragment=onboarding-step"


def test_the_traces_step_is_ticked_once_a_trace_arrives(owner, outsider):
    assert 'class="step" data-step="traces"' in owner.web.get(URL, **HTMX).content.decode()
    sent = post_traces(outsider.key, body_of(span(attributes=llm_attributes("theirs"))))
    assert sent.status_code == 200
    assert 'class="step" data-step="traces"' in owner.web.get(URL, **HTMX).content.decode()
    post_traces(owner.key, body_of(span(attributes=llm_attributes("first-session"))))
    html = owner.web.get(URL, **HTMX).content.decode()
    assert 'class="step done" data-step="traces"' in html and "<html" not in html
