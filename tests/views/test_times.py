"""How the pages write a time (tasksapp/presenters/times.py): the full time, the zone and its
abbreviation are Django's date format's, though written without it, in every zone and across clock
changes (where a wall time is ambiguous or does not exist, Django writes no abbreviation)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from django.utils.dateformat import format as date_format

from tasksapp.presenters.times import absolute, stamp, stamped

ZONES = ["UTC", "America/New_York", "Europe/London", "Asia/Shanghai", "Asia/Kolkata", "Australia/Lord_Howe"]
# Around the 2026 clock changes in New York, London and Lord Howe (a half-hour change), and years
# that need their leading zeros.
MOMENTS = [
    *(datetime(2026, 3, 8, 6, 0, tzinfo=UTC) + timedelta(minutes=10 * i) for i in range(24)),
    *(datetime(2026, 11, 1, 5, 0, tzinfo=UTC) + timedelta(minutes=10 * i) for i in range(24)),
    *(datetime(2026, 10, 25, 0, 0, tzinfo=UTC) + timedelta(minutes=10 * i) for i in range(12)),
    *(datetime(2026, 4, 4, 14, 0, tzinfo=UTC) + timedelta(minutes=10 * i) for i in range(12)),
    datetime(999, 1, 2, 3, 4, 5, 6000, tzinfo=UTC),
    datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]


def djangos(moment: datetime, fmt: str) -> tuple[str, str, str]:
    """(the time in `fmt`, the full time with its zone, the zone's abbreviation or name) by Django."""
    local = timezone.localtime(moment)
    zone, abbreviation = timezone.get_current_timezone_name(), date_format(local, "T")
    suffix = f" ({abbreviation})" if abbreviation and abbreviation != zone else ""
    full = f"{date_format(local, 'Y-m-d H:i:s')} {zone}{suffix}"
    return date_format(local, fmt), full, abbreviation or zone


@pytest.mark.parametrize("zone", ZONES)
def test_times_are_written_as_djangos_date_format_writes_them(zone: str) -> None:
    with timezone.override(zone):
        for moment in MOMENTS:
            local = timezone.localtime(moment).isoformat()
            for fmt in ("Y-m-d H:i:s", "H:i:s", "D H:i"):
                shown, full, abbreviation = djangos(moment, fmt)
                assert absolute(moment) == full
                assert stamp(moment, fmt) == (
                    f'<time datetime="{local}" title="{full}">{shown} {abbreviation}</time>'
                )
                assert stamped(moment, fmt, prefix="since ") == (
                    f'<time datetime="{local}" title="{full}">since {shown} {abbreviation}</time>'
                )
