"""Log-in lockout (django-axes), sign-up and API throttles, and JSON (never HTML) API 500s."""

import pytest
from django.test import Client

from belvedir.models import AuditEvent

SIGNUP = {"email": "new@example.com", "password": "correct-horse-9", "organization": "New"}


def _login(client: Client, email: str, password: str):
    return client.post("/login/", {"username": email, "password": password})


def test_log_ins_lock_out_after_repeated_failures_even_with_the_right_password(owner, settings):
    settings.AXES_FAILURE_LIMIT = 3
    client = Client()
    for attempt in ["wrong-1", "wrong-2"]:
        assert _login(client, "owner@example.com", attempt).status_code == 200
    # A differently cased email is the same account: the third failure locks it.
    locked = _login(client, "OWNER@example.com", "wrong-3")
    assert locked.status_code == 429
    right = _login(client, "owner@example.com", "correct-horse-9")
    assert right.status_code == 429, "a locked-out address logged in"
    body = right.content.decode()
    assert "Too many failed log-ins" in body and "Try again in 15 minutes" in body
    assert right["Retry-After"] == str(15 * 60)
    assert '<header class="top">' in body  # the site's page, not a bare message
    assert "_auth_user_id" not in client.session


def test_a_lockout_holds_one_address_and_leaves_the_account_open_elsewhere(owner, settings):
    settings.AXES_FAILURE_LIMIT = 2
    attacker = Client(REMOTE_ADDR="203.0.113.9")
    for attempt in ["wrong-1", "wrong-2"]:
        _login(attacker, "owner@example.com", attempt)
    assert _login(attacker, "owner@example.com", "correct-horse-9").status_code == 429
    response = _login(Client(REMOTE_ADDR="198.51.100.7"), "owner@example.com", "correct-horse-9")
    assert response.status_code == 302


def test_sign_ups_are_limited_per_address_with_retry_after(db, settings):
    settings.BELVEDIR_SIGNUP_RATE = "2/hour"
    client = Client()
    assert client.post("/signup/", SIGNUP).status_code == 302
    assert client.post("/signup/", {**SIGNUP, "email": "x"}).status_code == 400
    refused = client.post("/signup/", {**SIGNUP, "email": "third@example.com"})
    assert refused.status_code == 429
    assert "Too many sign-ups from your address" in refused.content.decode()
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert Client(REMOTE_ADDR="198.51.100.7").get("/signup/").status_code == 200


def test_the_api_is_throttled_per_key_with_429_and_retry_after(owner, outsider, settings):
    settings.BELVEDIR_API_RATE = "3/minute"
    for _ in range(3):
        assert owner.api.get("/api/v1/harnesses").status_code == 200
    throttled = owner.api.get("/api/v1/harnesses")
    assert throttled.status_code == 429
    assert throttled["Content-Type"] == "application/json"
    assert 0 < int(throttled["Retry-After"]) <= 60
    assert "throttled" in throttled.json()["detail"].lower()
    # Another key (another tenant) is counted on its own.
    assert outsider.api.get("/api/v1/harnesses").status_code == 200


def test_signed_in_users_are_throttled_per_user(owner, readonly, settings):
    settings.BELVEDIR_API_RATE = "2/minute"
    for _ in range(2):
        assert readonly.api.get("/api/v1/runs").status_code == 200
    assert readonly.api.get("/api/v1/runs").status_code == 429
    assert owner.api.get("/api/v1/runs").status_code == 200


@pytest.mark.urls("tests.belvedir.urls_raising")
@pytest.mark.parametrize("path", ["/api/v1/boom", "/api/v1/plain-boom"])
def test_an_unexpected_error_in_the_api_answers_json_500_never_html(owner, path):
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {owner.key}")
    response = client.get(path)
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert "went wrong on our side" in response.json()["detail"]
    assert "unexpected bug" not in response.content.decode()  # no internals leak


@pytest.mark.urls("tests.belvedir.urls_raising")
def test_an_unexpected_error_on_a_page_keeps_the_html_error_page(db):
    response = Client(raise_request_exception=False).get("/plain-boom/")
    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")


def test_failed_and_successful_log_ins_are_audited_for_the_accounts_organizations(owner):
    client = Client(REMOTE_ADDR="198.51.100.7")
    _login(client, "owner@example.com", "wrong")
    _login(client, "owner@example.com", "correct-horse-9")
    events = list(AuditEvent.objects.filter(organization=owner.org).order_by("id"))
    assert [(e.action, e.target, e.ip) for e in events[-2:]] == [
        ("login.failed", "owner@example.com", "198.51.100.7"),
        ("login", "owner@example.com", "198.51.100.7"),
    ]
    assert events[-2].actor_label == "anonymous" and events[-1].actor_user == owner.user
    _login(client, "nobody@example.com", "x")
    assert AuditEvent.objects.filter(
        organization=None, action="login.failed", target="nobody@example.com"
    ).exists()
