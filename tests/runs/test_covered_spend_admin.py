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
