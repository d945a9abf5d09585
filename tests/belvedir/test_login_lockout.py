"""The log-in lockout counts per account as well as per (account, address): guessing one
account's password from many addresses stops at BELVEDIR_ACCOUNT_LOCKOUT_LIMIT, while the
account's owner still signs in from an address they used before. The address is the
connection's: `make up`'s server (scripts/serve.sh) believes no X-Forwarded-For unless
BELVEDIR_FORWARDED_ALLOW_IPS names the proxy, so a spoofed header neither spreads the guesses
over made-up addresses nor counts them against a victim's address."""

import re

import httpx
import pytest
from axes.models import AccessAttempt
from django.db import connection
from django.test import Client

from tests.router.helpers import ROOT, free_port, start_uvicorn

PASSWORD = "correct-horse-9"


def _login(client: Client, password: str, email: str = "owner@example.com"):
    return client.post("/login/", {"username": email, "password": password})


@pytest.mark.django_db
def test_failures_from_many_addresses_lock_the_account_for_new_addresses(owner, settings):
    settings.AXES_FAILURE_LIMIT, settings.BELVEDIR_ACCOUNT_LOCKOUT_LIMIT = 3, 6
    # One failure each from six addresses: no address reaches its limit, the account does.
    statuses = [
        _login(Client(REMOTE_ADDR=f"203.0.113.{i + 1}"), f"wrong-{i}").status_code for i in range(6)
    ]
    assert statuses == [200] * 5 + [429]

    guess = _login(Client(REMOTE_ADDR="203.0.113.77"), PASSWORD)

    assert guess.status_code == 429, "the seventh address's right guess signed in"
    body = guess.content.decode()
    assert "6 failed log-ins from several addresses" in body
    assert "Sign in from a device you have used before" in body
    assert guess["Retry-After"] == str(15 * 60)


@pytest.mark.django_db
def test_during_an_account_lockout_its_owner_signs_in_from_an_address_used_before(owner, settings):
    settings.AXES_FAILURE_LIMIT, settings.BELVEDIR_ACCOUNT_LOCKOUT_LIMIT = 3, 6
    home = Client(REMOTE_ADDR="198.51.100.7")
    assert _login(home, PASSWORD).status_code == 302
    home.post("/logout/")
    for i in range(12):
        _login(Client(REMOTE_ADDR=f"203.0.113.{i + 1}"), f"wrong-{i}")

    assert _login(home, PASSWORD).status_code == 302
    assert _login(Client(REMOTE_ADDR="192.0.2.50"), PASSWORD).status_code == 429


@pytest.mark.django_db
def test_the_account_lock_lifts_once_its_failures_are_a_cool_off_old(owner, settings):
    settings.AXES_FAILURE_LIMIT, settings.BELVEDIR_ACCOUNT_LOCKOUT_LIMIT = 3, 6
    for i in range(6):
        _login(Client(REMOTE_ADDR=f"203.0.113.{i + 1}"), f"wrong-{i}")
    assert _login(Client(REMOTE_ADDR="192.0.2.50"), PASSWORD).status_code == 429

    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.get(ip_address="203.0.113.1").attempt_time
        - settings.AXES_COOLOFF_TIME
    )

    assert _login(Client(REMOTE_ADDR="192.0.2.50"), PASSWORD).status_code == 302


def _serve(tmp_path, **env: str):
    port = free_port()
    process = start_uvicorn(
        upstream_base="http://127.0.0.1:9",
        database_name=connection.settings_dict["NAME"],
        port=port,
        log_path=tmp_path / f"serve-{port}.log",
        command=["bash", str(ROOT / "scripts" / "serve.sh")],
        UVICORN_LOG_LEVEL="warning",
        AXES_FAILURE_LIMIT="3",
        **env,
    )
    return process, f"http://127.0.0.1:{port}"


def _failed_logins(url: str, forwarded_for: list[str]) -> list[int]:
    statuses = []
    with httpx.Client(base_url=url, timeout=30) as http:
        for address in forwarded_for:
            form = http.get("/login/")
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)[1]
            answer = http.post(
                "/login/",
                data={
                    "csrfmiddlewaretoken": token,
                    "username": "owner@example.com",
                    "password": "wrong",
                },
                headers={"X-Forwarded-For": address},
            )
            statuses.append(answer.status_code)
    return statuses


@pytest.mark.django_db(transaction=True)
def test_a_spoofed_x_forwarded_for_does_not_change_which_address_a_failure_counts_for(
    owner, tmp_path
):
    process, url = _serve(tmp_path)
    try:
        statuses = _failed_logins(url, ["203.0.113.1", "203.0.113.2", "203.0.113.3", "1.2.3.4"])
    finally:
        process.terminate()
        process.wait(timeout=20)

    counted = set(AccessAttempt.objects.values_list("ip_address", flat=True))
    assert counted == {"127.0.0.1"}, "a failure counted for the address its header named"
    assert statuses == [200, 200, 429, 429], "rotating the header escaped the lockout"


@pytest.mark.django_db(transaction=True)
def test_behind_a_proxy_named_in_forwarded_allow_ips_its_header_is_the_address(owner, tmp_path):
    process, url = _serve(tmp_path, BELVEDIR_FORWARDED_ALLOW_IPS="127.0.0.1")
    try:
        _failed_logins(url, ["203.0.113.1", "203.0.113.2"])
    finally:
        process.terminate()
        process.wait(timeout=20)

    counted = set(AccessAttempt.objects.values_list("ip_address", flat=True))
    assert counted == {"203.0.113.1", "203.0.113.2"}
