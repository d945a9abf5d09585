"""The admin sums platform-covered model spend per organization; none of it is charged."""

import pytest

from billing import selectors

pytestmark = pytest.mark.django_db


def test_covered_model_spend_is_summed_per_organization_and_not_charged(
    superuser, owner, outsider, make_run
):
    make_run(covered=True, covered_spent_micros=1_250_000)
    make_run(covered=True, covered_spent_micros=250_000)
    make_run(covered=False)
    make_run(project=outsider.project, covered=True, covered_spent_micros=40_003)

    page = superuser.get("/admin/runs/organizationspend/").content.decode()

    acme = page[page.index(">Acme<") :]
    assert "$1.50" in acme[: acme.index("</tr>")]
    globex = page[page.index(">Globex<") :]
    assert "$0.040003" in globex[: globex.index("</tr>")]  # exact, not rounded to cents
    assert selectors.balance(organization=owner.org) == 0


def test_the_operator_sees_what_upstreams_reported_past_the_reservations(
    superuser, owner, outsider, make_run
):
    run = make_run(
        covered=True,
        covered_spent_micros=233,
        covered_excess_micros=999_767,
        covered_excess_calls=1,
    )
    make_run(covered=True, covered_excess_micros=500_000, covered_excess_calls=2)

    page = superuser.get("/admin/runs/organizationspend/").content.decode()

    assert "upstream reported more than reserved" in page.lower()
    acme = page[page.index(">Acme<") :]
    row = acme[: acme.index("</tr>")]
    assert "$1.499767" in row and ">3<" in row  # summed, exact; three calls over
    runs = superuser.get("/admin/runs/run/").content.decode()
    assert "upstream reported more than reserved" in runs.lower() and "$0.999767" in runs
    detail = superuser.get(f"/admin/runs/run/{run.pk}/change/")
    assert detail.status_code == 200, (detail.status_code, detail.get("Location"))
    assert "$0.999767" in detail.content.decode()


MONEY = [
    "covered",
    "model_covered",
    "judge_covered",
    "covered_cap_micros",
    "covered_reserved_micros",
    "covered_spent_micros",
    "covered_excess_micros",
    "covered_excess_calls",
]


def test_the_runs_covered_money_is_shown_but_not_editable_in_the_admin(superuser, make_run):
    run = make_run(covered=True, covered_cap_micros=2_000_000, covered_spent_micros=1_234_567)
    page = superuser.get(f"/admin/runs/run/{run.pk}/change/").content.decode()
    assert "1234567" in page and "2000000" in page  # shown
    for name in MONEY + ["harness_env_secrets_encrypted"]:
        assert f'name="{name}"' not in page, name  # no input for it
    # A hand-made post cannot move them either.
    data = {name: "0" for name in MONEY} | {"covered": "", "stage": run.stage}
    superuser.post(f"/admin/runs/run/{run.pk}/change/", data)
    run.refresh_from_db()
    assert (run.covered, run.covered_cap_micros, run.covered_spent_micros) == (
        True,
        2_000_000,
        1_234_567,
    )
