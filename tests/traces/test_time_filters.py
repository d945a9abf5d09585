"""Session time filters: any value that is not a usable time is a 400 naming the filter."""

import pytest

BAD = [
    "0001-01-01T00:00:00+14:00",  # before year 1 in UTC
    "9999-12-31T23:59:59-14:00",  # after 9999 in UTC
    "0001-01-01T00:00:00+00:01",
    "9999-12-31T23:59:59.999999-00:00:01",
    "2026-01-01T00:00:00+24:00",  # not an offset
    "2026-13-01",
    "yesterday",
    "2026-01-01T25:00",
]
GOOD = ["0001-01-01T00:00:00-14:00", "9999-12-31T23:59:59+14:00", "2026-01-01", "2026-01-01T12:00Z"]


@pytest.mark.parametrize("field", ["since", "until"])
@pytest.mark.parametrize("value", BAD)
def test_an_unusable_time_filter_is_a_400_in_the_api_and_the_page(owner, field, value):
    response = owner.api.get("/api/v1/sessions", {field: value})
    assert response.status_code == 400, (value, response.content[:300])
    assert field in response.json()
    page = owner.web.get("/traces/", {field: value})
    assert page.status_code == 400
    assert f"{field} " in page.content.decode()


@pytest.mark.parametrize("value", GOOD)
def test_times_at_the_edges_of_the_range_filter_normally(owner, value):
    assert owner.api.get("/api/v1/sessions", {"since": value, "until": value}).status_code == 200
    assert owner.web.get("/traces/", {"since": value}).status_code == 200
