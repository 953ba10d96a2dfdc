"""The ISO 8601 texts of `plait._util.clock` are `datetime.isoformat`'s, to the character."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from plait._util.clock import iso, iso_now

MOMENTS = [
    datetime(2026, 12, 7, 3, 9, 50, 123456, tzinfo=UTC),
    datetime(2026, 12, 7, 3, 9, 50, 7, tzinfo=UTC),  # leading zeros in the fraction
    datetime(2026, 12, 7, 3, 9, 50, 1000, tzinfo=UTC),
    datetime(2026, 12, 7, 3, 9, 50, tzinfo=UTC),  # no fraction at all
    datetime(1, 1, 1, tzinfo=UTC),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2026, 12, 7, 3, 9, 50, 5, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2026, 12, 7, 3, 9, 50, 5),  # naive
    datetime.fromisoformat("2026-12-07T03:09:50.5+00:00"),  # read back: UTC again
]


@pytest.mark.parametrize("moment", MOMENTS, ids=str)
def test_iso_writes_what_isoformat_writes(moment: datetime) -> None:
    assert iso(moment) == moment.isoformat()
    assert iso(moment) == moment.isoformat()  # the second's text, kept, gives the same


def test_iso_keeps_only_a_few_seconds_and_stays_right_past_them() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for n in range(200):
        moment = start + timedelta(seconds=n, microseconds=n)
        assert iso(moment) == moment.isoformat()


def test_iso_now_is_this_moment_in_utc() -> None:
    before = datetime.now(UTC)
    text = iso_now()
    after = datetime.now(UTC)
    read = datetime.fromisoformat(text)
    assert read.tzinfo is UTC
    assert before - timedelta(microseconds=1) <= read <= after
    assert text == read.isoformat()  # written as `isoformat` writes it
