"""Cron engine: exact DST behaviour, ordinary calendar cases and invalid input.

Every expected UTC time below is written from the tz database rules (the transition instants are
checked on their own in test_tz_facts), never copied from the engine's output.
"""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from duetime.domain.cron import CronSchedule, Fold, Gap, load_zone
from duetime.domain.errors import InvalidInput, InvalidSchedule
from hypothesis import given, settings
from hypothesis import strategies as st


def utc(text: str) -> datetime:
    """'2026-03-08 07:00' as an aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def runs(expression: str, zone: str, after: str, count: int) -> list[str]:
    out = CronSchedule(expression, zone).runs(utc(after), count)
    return [r.strftime("%Y-%m-%d %H:%M") for r in out]


# --------------------------------------------------------------------------------------------------
# The tz database facts the DST table relies on (2026 rules).

TZ_FACTS = [
    # zone, last instant of the old offset + 1s = transition (UTC), offset before, offset after (hours)
    ("America/New_York", "2026-03-08 07:00", -5, -4),  # 02:00 EST -> 03:00 EDT
    ("America/New_York", "2026-11-01 06:00", -4, -5),  # 02:00 EDT -> 01:00 EST
    ("Europe/London", "2026-03-29 01:00", 0, 1),  # last Sunday of March, 01:00 UTC
    ("Europe/London", "2026-10-25 01:00", 1, 0),  # last Sunday of October, 01:00 UTC
    ("Australia/Lord_Howe", "2026-04-04 15:00", 11, 10.5),  # 02:00 +11 -> 01:30 +10:30
    ("Australia/Lord_Howe", "2026-10-03 15:30", 10.5, 11),  # 02:00 +10:30 -> 02:30 +11
    ("America/Havana", "2026-03-08 05:00", -5, -4),  # 00:00 -> 01:00 (midnight does not exist)
    ("America/Havana", "2026-11-01 05:00", -4, -5),  # 01:00 -> 00:00 (midnight hour twice)
    ("America/Santiago", "2026-04-05 03:00", -3, -4),  # Sun 00:00 -> Sat 23:00
    ("America/Santiago", "2026-09-06 04:00", -4, -3),  # 00:00 -> 01:00
    # Negative DST: Irish Standard Time (+1) is the zone's standard time, winter GMT its "DST".
    ("Europe/Dublin", "2026-03-29 01:00", 0, 1),  # 01:00 GMT -> 02:00 IST
    ("Europe/Dublin", "2026-10-25 01:00", 1, 0),  # 02:00 IST -> 01:00 GMT
]


@pytest.mark.parametrize(("zone", "at", "before", "after"), TZ_FACTS)
def test_tz_facts(zone: str, at: str, before: float, after: float) -> None:
    tz = ZoneInfo(zone)
    instant = utc(at)
    assert (instant - timedelta(seconds=1)).astimezone(tz).utcoffset() == timedelta(hours=before)
    assert instant.astimezone(tz).utcoffset() == timedelta(hours=after)
    # and nothing else changes within two days either side
    for hours in range(-48, 48):
        probe = instant + timedelta(hours=hours, minutes=1) if hours >= 0 else instant + timedelta(hours=hours)
        expected = after if hours >= 0 else before
        assert probe.astimezone(tz).utcoffset() == timedelta(hours=expected)


# --------------------------------------------------------------------------------------------------
# DST table: expression, zone, search start (UTC), expected runs (UTC)

DST_CASES = [
    # ---- America/New_York spring forward 2026-03-08 02:00 EST (07:00Z) -> 03:00 EDT
    pytest.param(
        "30 2 * * *",
        "America/New_York",
        "2026-03-07 00:00",
        ["2026-03-07 07:30", "2026-03-08 07:00", "2026-03-09 06:30"],
        id="ny-spring-fixed-0230-in-gap-runs-at-0300",
    ),
    pytest.param(
        "30 1 * * *",
        "America/New_York",
        "2026-03-07 00:00",
        ["2026-03-07 06:30", "2026-03-08 06:30", "2026-03-09 05:30"],
        id="ny-spring-fixed-0130",
    ),
    pytest.param(
        "*/30 * * * *",
        "America/New_York",
        "2026-03-08 05:00",
        ["2026-03-08 05:30", "2026-03-08 06:00", "2026-03-08 06:30", "2026-03-08 07:00", "2026-03-08 07:30"],
        id="ny-spring-every-30-skips-gap",
    ),
    pytest.param(
        "0 * * * *",
        "America/New_York",
        "2026-03-08 04:30",
        ["2026-03-08 05:00", "2026-03-08 06:00", "2026-03-08 07:00", "2026-03-08 08:00"],
        id="ny-spring-hourly",
    ),
    pytest.param(
        "15 1-3 * * *",
        "America/New_York",
        "2026-03-08 00:00",
        ["2026-03-08 06:15", "2026-03-08 07:00", "2026-03-08 07:15", "2026-03-09 05:15"],
        id="ny-spring-fixed-range-0215-to-0300",
    ),
    pytest.param(
        "0,30 2 * * *",
        "America/New_York",
        "2026-03-07 00:00",
        ["2026-03-07 07:00", "2026-03-07 07:30", "2026-03-08 07:00", "2026-03-09 06:00"],
        id="ny-spring-two-times-in-gap-run-once",
    ),
    pytest.param(
        "0 2,3 * * *",
        "America/New_York",
        "2026-03-08 00:00",
        ["2026-03-08 07:00", "2026-03-09 06:00", "2026-03-09 07:00"],
        id="ny-spring-gap-and-0300-are-one-run",
    ),
    pytest.param(
        "* 2 8 3 *",
        "America/New_York",
        "2026-03-01 00:00",
        ["2027-03-08 07:00", "2027-03-08 07:01"],
        id="ny-spring-nonfixed-all-in-gap-not-run",
    ),
    # ---- America/New_York fall back 2026-11-01 02:00 EDT (06:00Z) -> 01:00 EST
    pytest.param(
        "30 2 * * *",
        "America/New_York",
        "2026-10-31 00:00",
        ["2026-10-31 06:30", "2026-11-01 07:30", "2026-11-02 07:30"],
        id="ny-fall-fixed-0230",
    ),
    pytest.param(
        "30 1 * * *",
        "America/New_York",
        "2026-10-31 00:00",
        ["2026-10-31 05:30", "2026-11-01 05:30", "2026-11-02 06:30"],
        id="ny-fall-fixed-0130-once-first-occurrence",
    ),
    pytest.param(
        "30 1 * * *",
        "America/New_York",
        "2026-11-01 05:30",
        ["2026-11-02 06:30"],
        id="ny-fall-fixed-0130-not-again-from-first",
    ),
    pytest.param(
        "*/30 * * * *",
        "America/New_York",
        "2026-11-01 04:00",
        ["2026-11-01 04:30", "2026-11-01 05:00", "2026-11-01 05:30", "2026-11-01 06:00", "2026-11-01 06:30"],
        id="ny-fall-every-30-runs-repeated-hour-twice",
    ),
    pytest.param(
        "0 * * * *",
        "America/New_York",
        "2026-11-01 03:30",
        ["2026-11-01 04:00", "2026-11-01 05:00", "2026-11-01 06:00", "2026-11-01 07:00"],
        id="ny-fall-hourly-0100-twice",
    ),
    pytest.param(
        "15 1-3 * * *",
        "America/New_York",
        "2026-11-01 00:00",
        ["2026-11-01 05:15", "2026-11-01 07:15", "2026-11-01 08:15", "2026-11-02 06:15"],
        id="ny-fall-fixed-range-0115-once",
    ),
    pytest.param(
        "*/20 1 * * *",
        "America/New_York",
        "2026-11-01 05:30",
        ["2026-11-01 05:40", "2026-11-01 06:00", "2026-11-01 06:20", "2026-11-01 06:40", "2026-11-02 06:00"],
        id="ny-fall-nonfixed-from-inside-first-occurrence",
    ),
    pytest.param(
        "*/20 1 * * *",
        "America/New_York",
        "2026-11-01 06:10",
        ["2026-11-01 06:20", "2026-11-01 06:40", "2026-11-02 06:00"],
        id="ny-fall-nonfixed-from-inside-second-occurrence",
    ),
    # ---- Europe/London
    pytest.param(
        "30 1 * * *",
        "Europe/London",
        "2026-03-28 00:00",
        ["2026-03-28 01:30", "2026-03-29 01:00", "2026-03-30 00:30"],
        id="london-spring-fixed",
    ),
    pytest.param(
        "*/20 1 * * *",
        "Europe/London",
        "2026-03-28 02:00",
        ["2026-03-30 00:00", "2026-03-30 00:20"],
        id="london-spring-nonfixed-skips-gap-day",
    ),
    pytest.param(
        "30 1 * * *",
        "Europe/London",
        "2026-10-24 00:00",
        ["2026-10-24 00:30", "2026-10-25 00:30", "2026-10-26 01:30"],
        id="london-fall-fixed",
    ),
    pytest.param(
        "*/20 1 * * *",
        "Europe/London",
        "2026-10-24 23:00",
        [
            "2026-10-25 00:00",
            "2026-10-25 00:20",
            "2026-10-25 00:40",
            "2026-10-25 01:00",
            "2026-10-25 01:20",
            "2026-10-25 01:40",
            "2026-10-26 01:00",
        ],
        id="london-fall-nonfixed-twice",
    ),
    # ---- Australia/Lord_Howe (30-minute shifts)
    pytest.param(
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-03 00:00",
        ["2026-04-03 14:45", "2026-04-04 14:45", "2026-04-05 15:15"],
        id="lord-howe-fall-fixed-once",
    ),
    pytest.param(
        "*/15 1 * * *",
        "Australia/Lord_Howe",
        "2026-04-04 13:00",
        [
            "2026-04-04 14:00",
            "2026-04-04 14:15",
            "2026-04-04 14:30",
            "2026-04-04 14:45",
            "2026-04-04 15:00",
            "2026-04-04 15:15",
            "2026-04-05 14:30",
        ],
        id="lord-howe-fall-nonfixed-0130-0145-twice",
    ),
    pytest.param(
        "15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-02 00:00",
        ["2026-10-02 15:45", "2026-10-03 15:30", "2026-10-04 15:15"],
        id="lord-howe-spring-fixed-0215-at-0230",
    ),
    pytest.param(
        "*/15 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03 15:00",
        ["2026-10-03 15:30", "2026-10-03 15:45", "2026-10-04 15:00"],
        id="lord-howe-spring-nonfixed",
    ),
    # ---- midnight changes: America/Havana, America/Santiago
    pytest.param(
        "0 0 * * *",
        "America/Havana",
        "2026-03-06 12:00",
        ["2026-03-07 05:00", "2026-03-08 05:00", "2026-03-09 04:00"],
        id="havana-spring-midnight-missing-runs-at-0100",
    ),
    pytest.param(
        "*/30 0 * * *",
        "America/Havana",
        "2026-03-07 12:00",
        ["2026-03-09 04:00", "2026-03-09 04:30"],
        id="havana-spring-nonfixed-midnight-hour-skipped",
    ),
    pytest.param(
        "0 0 * * *",
        "America/Havana",
        "2026-10-31 00:00",
        ["2026-10-31 04:00", "2026-11-01 04:00", "2026-11-02 05:00"],
        id="havana-fall-midnight-once",
    ),
    pytest.param(
        "*/30 0 * * *",
        "America/Havana",
        "2026-11-01 00:00",
        ["2026-11-01 04:00", "2026-11-01 04:30", "2026-11-01 05:00", "2026-11-01 05:30", "2026-11-02 05:00"],
        id="havana-fall-nonfixed-midnight-hour-twice",
    ),
    pytest.param(
        "0 0 * * 0",
        "America/Santiago",
        "2026-09-01 00:00",
        ["2026-09-06 04:00", "2026-09-13 03:00"],
        id="santiago-spring-sunday-midnight-missing",
    ),
    pytest.param(
        "30 23 * * *",
        "America/Santiago",
        "2026-04-03 12:00",
        ["2026-04-04 02:30", "2026-04-05 02:30", "2026-04-06 03:30"],
        id="santiago-fall-fixed-2330-saturday-once",
    ),
    pytest.param(
        "*/30 23 * * *",
        "America/Santiago",
        "2026-04-04 12:00",
        ["2026-04-05 02:00", "2026-04-05 02:30", "2026-04-05 03:00", "2026-04-05 03:30", "2026-04-06 03:00"],
        id="santiago-fall-nonfixed-2300-hour-twice",
    ),
    # ---- no DST
    pytest.param(
        "0 9 * * *",
        "Asia/Kolkata",
        "2026-03-08 00:00",
        ["2026-03-08 03:30", "2026-03-09 03:30"],
        id="kolkata",
    ),
    pytest.param(
        "*/45 * * * *",
        "Asia/Kolkata",
        "2026-11-01 03:00",
        ["2026-11-01 03:15", "2026-11-01 03:30", "2026-11-01 04:15"],
        id="kolkata-step-45",
    ),
]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), DST_CASES)
def test_dst_table(expression: str, zone: str, after: str, expected: list[str]) -> None:
    assert runs(expression, zone, after, len(expected)) == expected


# --------------------------------------------------------------------------------------------------
# DST policy table (schedule.dst): expression, zone, gap, fold (None: the default by kind), search start,
# expected runs (UTC). Each policy in each kind of change: a whole hour, 30 minutes, negative DST.

DST_POLICY_CASES = [
    # ---- America/New_York: gap 02:00-03:00 on 2026-03-08, 01:00-02:00 twice on 2026-11-01
    pytest.param(
        "30 2 * * *", "America/New_York", "skip", None, "2026-03-07 00:00",
        ["2026-03-07 07:30", "2026-03-09 06:30"],
        id="ny-fixed-gap-skip-no-run-that-day",
    ),
    pytest.param(
        "15 * * * *", "America/New_York", "shift", None, "2026-03-08 05:00",
        ["2026-03-08 05:15", "2026-03-08 06:15", "2026-03-08 07:00", "2026-03-08 07:15"],
        id="ny-hourly-gap-shift-0215-runs-at-0300",
    ),
    pytest.param(
        "15 * * * *", "America/New_York", None, None, "2026-03-08 05:00",
        ["2026-03-08 05:15", "2026-03-08 06:15", "2026-03-08 07:15", "2026-03-08 08:15"],
        id="ny-hourly-default-skips-0215",
    ),
    pytest.param(
        "30 1 * * *", "America/New_York", None, "last", "2026-10-31 00:00",
        ["2026-10-31 05:30", "2026-11-01 06:30", "2026-11-02 06:30"],
        id="ny-fixed-fold-last-0130-est",
    ),
    pytest.param(
        "30 1 * * *", "America/New_York", None, "last", "2026-11-01 05:30",
        ["2026-11-01 06:30", "2026-11-02 06:30"],
        id="ny-fixed-fold-last-from-the-first-occurrence",
    ),
    pytest.param(
        "30 1 * * *", "America/New_York", None, "both", "2026-10-31 00:00",
        ["2026-10-31 05:30", "2026-11-01 05:30", "2026-11-01 06:30", "2026-11-02 06:30"],
        id="ny-fixed-fold-both-0130-twice",
    ),
    pytest.param(
        "*/30 * * * *", "America/New_York", None, "first", "2026-11-01 04:00",
        ["2026-11-01 04:30", "2026-11-01 05:00", "2026-11-01 05:30", "2026-11-01 07:00", "2026-11-01 07:30"],
        id="ny-every-30-fold-first",
    ),
    pytest.param(
        "*/30 * * * *", "America/New_York", None, "last", "2026-11-01 04:00",
        ["2026-11-01 04:30", "2026-11-01 06:00", "2026-11-01 06:30", "2026-11-01 07:00"],
        id="ny-every-30-fold-last",
    ),
    pytest.param(
        "*/20 1 * * *", "America/New_York", None, "last", "2026-11-01 05:30",
        ["2026-11-01 06:00", "2026-11-01 06:20", "2026-11-01 06:40", "2026-11-02 06:00"],
        id="ny-nonfixed-fold-last-from-inside-first-occurrence",
    ),
    pytest.param(
        "30 1 1 11 *", "America/New_York", None, "last", "2025-11-02 05:45",
        ["2026-11-01 06:30", "2027-11-01 05:30"],
        id="ny-fold-last-from-a-fold-without-a-match-to-the-next-fold",
    ),
    # ---- Australia/Lord_Howe: 30-minute shifts (01:30-02:00 twice on 2026-04-04, gap 02:00-02:30 on 10-03)
    pytest.param(
        "45 1 * * *", "Australia/Lord_Howe", None, "last", "2026-04-03 00:00",
        ["2026-04-03 14:45", "2026-04-04 15:15", "2026-04-05 15:15"],
        id="lord-howe-fold-last",
    ),
    pytest.param(
        "45 1 * * *", "Australia/Lord_Howe", None, "both", "2026-04-03 00:00",
        ["2026-04-03 14:45", "2026-04-04 14:45", "2026-04-04 15:15", "2026-04-05 15:15"],
        id="lord-howe-fold-both",
    ),
    pytest.param(
        "15 2 * * *", "Australia/Lord_Howe", "skip", None, "2026-10-02 00:00",
        ["2026-10-02 15:45", "2026-10-04 15:15"],
        id="lord-howe-gap-skip",
    ),
    pytest.param(
        "15 * * * *", "Australia/Lord_Howe", "shift", None, "2026-10-03 14:00",
        ["2026-10-03 14:45", "2026-10-03 15:30", "2026-10-03 16:15"],
        id="lord-howe-hourly-gap-shift-0215-at-0230",
    ),
    pytest.param(
        "15 * * * *", "Australia/Lord_Howe", None, None, "2026-10-03 14:00",
        ["2026-10-03 14:45", "2026-10-03 16:15"],
        id="lord-howe-hourly-default-skip",
    ),
    # ---- Europe/Dublin: negative DST (gap 01:00-02:00 on 2026-03-29, 01:00-02:00 twice on 10-25)
    pytest.param(
        "30 1 * * *", "Europe/Dublin", None, None, "2026-03-28 00:00",
        ["2026-03-28 01:30", "2026-03-29 01:00", "2026-03-30 00:30"],
        id="dublin-fixed-default-shift",
    ),
    pytest.param(
        "30 1 * * *", "Europe/Dublin", "skip", None, "2026-03-28 00:00",
        ["2026-03-28 01:30", "2026-03-30 00:30"],
        id="dublin-fixed-gap-skip",
    ),
    pytest.param(
        "*/20 1 * * *", "Europe/Dublin", "shift", None, "2026-03-28 02:00",
        ["2026-03-29 01:00", "2026-03-30 00:00"],
        id="dublin-nonfixed-gap-shift-runs-once",
    ),
    pytest.param(
        "30 1 * * *", "Europe/Dublin", None, "last", "2026-10-24 00:00",
        ["2026-10-24 00:30", "2026-10-25 01:30", "2026-10-26 01:30"],
        id="dublin-fixed-fold-last",
    ),
    pytest.param(
        "30 1 * * *", "Europe/Dublin", None, "both", "2026-10-24 00:00",
        ["2026-10-24 00:30", "2026-10-25 00:30", "2026-10-25 01:30", "2026-10-26 01:30"],
        id="dublin-fixed-fold-both",
    ),
    pytest.param(
        "*/20 1 * * *", "Europe/Dublin", None, "first", "2026-10-24 23:00",
        ["2026-10-25 00:00", "2026-10-25 00:20", "2026-10-25 00:40", "2026-10-26 01:00"],
        id="dublin-nonfixed-fold-first",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "zone", "gap", "fold", "after", "expected"), DST_POLICY_CASES)
def test_dst_policy_table(
    expression: str, zone: str, gap: Gap | None, fold: Fold | None, after: str, expected: list[str]
) -> None:
    got = CronSchedule(expression, zone, gap=gap, fold=fold).runs(utc(after), len(expected))
    assert [r.strftime("%Y-%m-%d %H:%M") for r in got] == expected


# --------------------------------------------------------------------------------------------------
# Ordinary calendar cases (UTC unless stated)

ORDINARY_CASES = [
    pytest.param(
        "0 0 13 * 5", "2026-01-01 00:00", ["2026-01-02", "2026-01-09", "2026-01-13", "2026-01-16"], id="dom-or-dow"
    ),
    pytest.param("0 0 * * 5", "2026-01-01 00:00", ["2026-01-02", "2026-01-09"], id="dow-only"),
    pytest.param("0 0 13 * *", "2026-01-01 00:00", ["2026-01-13", "2026-02-13"], id="dom-only"),
    pytest.param(
        "0 0 */10 * 5",
        "2026-01-01 00:00",
        ["2026-05-01", "2026-07-31", "2026-08-21"],
        id="star-prefixed-dom-is-anded-like-vixie",
    ),
    pytest.param(
        "0 0 1-3 * sun",
        "2026-01-01 00:00",
        ["2026-01-02", "2026-01-03", "2026-01-04", "2026-01-11"],
        id="dom-range-or-sunday",
    ),
    pytest.param("0 0 * * 7", "2026-01-01 00:00", ["2026-01-04", "2026-01-11"], id="dow-7-is-sunday"),
    pytest.param("0 0 * * 0", "2026-01-01 00:00", ["2026-01-04", "2026-01-11"], id="dow-0-is-sunday"),
    pytest.param(
        "0 0 * * 5-7", "2026-01-01 00:00", ["2026-01-02", "2026-01-03", "2026-01-04", "2026-01-09"], id="dow-range-to-7"
    ),
    pytest.param("0 0 * * Mon-Fri", "2026-01-02 00:00", ["2026-01-05", "2026-01-06"], id="dow-names"),
    pytest.param("0 0 1 jan,Jul *", "2026-01-01 00:00", ["2026-07-01", "2027-01-01"], id="month-names"),
    pytest.param(
        "0 0 1 FEB-apr/2 *", "2026-01-01 00:00", ["2026-02-01", "2026-04-01", "2027-02-01"], id="month-name-range-step"
    ),
    pytest.param("0 0 29 2 *", "2026-03-01 00:00", ["2028-02-29", "2032-02-29"], id="feb-29"),
    pytest.param("0 0 29 2 *", "2096-03-01 00:00", ["2104-02-29"], id="feb-29-skips-2100"),
    pytest.param("0 0 31 * *", "2026-04-01 00:00", ["2026-05-31", "2026-07-31", "2026-08-31"], id="month-ends-31"),
    pytest.param("0 0 30 2,4 *", "2026-01-01 00:00", ["2026-04-30", "2027-04-30"], id="feb-30-never"),
    pytest.param("0 0 28-31 2 *", "2027-01-01 00:00", ["2027-02-28", "2028-02-28", "2028-02-29"], id="feb-end-range"),
    pytest.param("0 0 31 12 *", "2026-12-31 00:00", ["2027-12-31"], id="year-end-strictly-after"),
    pytest.param("0 0 30 2 1", "2026-02-01 00:00", ["2026-02-02", "2026-02-09"], id="impossible-dom-or-dow"),
]


@pytest.mark.parametrize(("expression", "after", "expected_days"), ORDINARY_CASES)
def test_ordinary_days(expression: str, after: str, expected_days: list[str]) -> None:
    got = CronSchedule(expression).runs(utc(after), len(expected_days))
    assert [r.date().isoformat() for r in got] == expected_days
    assert all(r.time().hour == 0 and r.time().minute == 0 for r in got)


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("*/5 * * * *", "2026-01-01 00:00", ["2026-01-01 00:05", "2026-01-01 00:10"]),
        ("*/5 * * * *", "2026-01-01 00:04:59.999", ["2026-01-01 00:05", "2026-01-01 00:10"]),
        ("*/5 * * * *", "2026-01-01 00:05:00.000001", ["2026-01-01 00:10"]),
        (
            "1-30/7 * * * *",
            "2026-01-01 00:00",
            [
                "2026-01-01 00:01",
                "2026-01-01 00:08",
                "2026-01-01 00:15",
                "2026-01-01 00:22",
                "2026-01-01 00:29",
                "2026-01-01 01:01",
            ],
        ),
        ("10/20 * * * *", "2026-01-01 00:00", ["2026-01-01 00:10", "2026-01-01 00:30", "2026-01-01 00:50"]),
        ("0 */6 * * *", "2026-01-01 00:00", ["2026-01-01 06:00", "2026-01-01 12:00", "2026-01-01 18:00"]),
        ("5,1,3 23 * * *", "2026-01-01 23:02", ["2026-01-01 23:03", "2026-01-01 23:05", "2026-01-02 23:01"]),
        ("59 23 31 12 *", "2026-06-01 00:00", ["2026-12-31 23:59", "2027-12-31 23:59"]),
        ("@hourly", "2026-01-01 00:00", ["2026-01-01 01:00", "2026-01-01 02:00"]),
        ("@daily", "2026-01-01 00:00", ["2026-01-02 00:00"]),
        ("@weekly", "2026-01-01 00:00", ["2026-01-04 00:00"]),
        ("@monthly", "2026-01-01 00:00", ["2026-02-01 00:00"]),
        ("@yearly", "2026-01-01 00:00", ["2027-01-01 00:00"]),
        ("  0   12 * * *  ", "2026-01-01 00:00", ["2026-01-01 12:00"]),
        ("0\t12 * * *", "2026-01-01 00:00", ["2026-01-01 12:00"]),
    ],
)
def test_ordinary_times(expression: str, after: str, expected: list[str]) -> None:
    got = CronSchedule(expression).runs(utc(after), len(expected))
    assert [r.strftime("%Y-%m-%d %H:%M") for r in got] == expected


def test_results_are_aware_utc_and_after_may_be_any_zone() -> None:
    schedule = CronSchedule("0 9 * * *", "Europe/Paris")
    after = datetime(2026, 7, 1, 9, 0, tzinfo=ZoneInfo("Europe/Paris"))
    got = schedule.next_after(after)
    assert got.tzinfo is UTC
    assert got == utc("2026-07-02 07:00")


def test_naive_after_is_rejected() -> None:
    with pytest.raises(ValueError, match="aware"):
        CronSchedule("* * * * *").next_after(datetime(2026, 1, 1))


def test_feb_29_on_a_sunday_is_found_decades_ahead() -> None:
    # `*/7` in day-of-week is {0, 7} = Sunday and star-prefixed, so the day fields are AND-ed.
    got = CronSchedule("0 0 29 2 */7").next_after(utc("2097-01-01 00:00"))
    expected = next(
        date(y, 2, 29)
        for y in range(2097, 2200)
        if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) and date(y, 2, 29).isoweekday() == 7
    )
    assert got.date() == expected


def test_no_run_near_the_end_of_time_raises_invalid_schedule() -> None:
    with pytest.raises(InvalidSchedule) as info:
        CronSchedule("0 0 1 1 *").next_after(utc("9999-06-01 00:00"))
    assert info.value.field == "schedule.cron"


def test_is_fixed_time() -> None:
    assert CronSchedule("30 2 * * *").is_fixed_time
    assert CronSchedule("15 1-3 * * *").is_fixed_time
    assert CronSchedule("0-59 0-23 * * *").is_fixed_time  # Vixie's rule is the first character
    assert not CronSchedule("*/30 * * * *").is_fixed_time
    assert not CronSchedule("0 * * * *").is_fixed_time
    assert not CronSchedule("* 2 * * *").is_fixed_time
    assert not CronSchedule("@hourly").is_fixed_time
    assert CronSchedule("@daily").is_fixed_time


def test_runs_count_zero_and_strictly_increasing() -> None:
    schedule = CronSchedule("*/7 * * * *", "America/New_York")
    assert schedule.runs(utc("2026-11-01 04:00"), 0) == []
    got = schedule.runs(utc("2026-11-01 04:00"), 40)
    assert all(a < b for a, b in itertools.pairwise(got))


def test_next_after_jumps_field_by_field_not_minute_by_minute(monkeypatch) -> None:
    # How much work a next run takes, counted, not timed (a timed bound failed on a loaded machine): each
    # step of the walk reads one month's matching days. A walk minute by minute would take ~19 steps a run of
    # this schedule (a week's 10,080 minutes over its 540 runs), and second by second ~60 times that.
    schedule = CronSchedule("*/5 9-17 * * mon-fri", "America/New_York")
    steps: list[int] = []
    month_days = CronSchedule._month_days

    def counted(self: CronSchedule, year: int, month: int) -> tuple[int, ...]:
        steps.append(month)
        return month_days(self, year, month)

    monkeypatch.setattr(CronSchedule, "_month_days", counted)
    after = utc("2026-03-01 00:00")  # the 2,000 runs cross New York's change to summer time
    for _ in range(2000):
        after = schedule.next_after(after)
    assert after == utc("2026-03-26 17:35")
    assert len(steps) <= 4 * 2000  # ~3.1 a run: the next second, then the next matching minute, hour or day


# --------------------------------------------------------------------------------------------------
# Invalid input

INVALID_EXPRESSIONS = [
    "",
    "   ",
    "* * * *",
    "* * * * * * *",
    "0 0 0 * * * 2026",
    "60 * * * * *",
    "-1 * * * * *",
    "*/0 * * * * *",
    "59-1 * * * * *",
    "L * * * * *",
    "0 60 * * * *",
    "60 * * * *",
    "* 24 * * *",
    "* * 0 * *",
    "* * 32 * *",
    "* * * 0 *",
    "* * * 13 *",
    "* * * * 8",
    "-1 * * * *",
    "*/0 * * * *",
    "5-1 * * * *",
    "* * * * SAT-SUN",
    "1,,2 * * * *",
    ",1 * * * *",
    "1, * * * *",
    "1-2-3 * * * *",
    "*/5/2 * * * *",
    "**/5 * * * *",
    "*-5 * * * *",
    "L * * * *",
    "* L * * *",
    "* * * L *",
    "* * * * L",
    "* * L-31 * *",
    "* * L-2-1 * *",
    "* * 0W * *",
    "* * 32W * *",
    "* * 1-5W * *",
    "* * W * *",
    "* * LW-1 * *",
    "* * 15W/2 * *",
    "* * * * 5#0",
    "* * * * 5#6",
    "* * * * 8#1",
    "* * * * 1-5#2",
    "* * * * FRIDAY#2",
    "* * * * 5L-1",
    "* * 5#2 * *",
    "* * * * 15W",
    "? * * * *",
    "* ? * * *",
    "* * * ? *",
    "0 0 31W 2 *",
    "0 0 L-29 2,2 *",
    "0 0 */30 * 1#2",
    "JAN * * * *",
    "* * * * JAN",
    "* * * MON *",
    "* * * JANUARY *",
    "* * * * MONDAY",
    "\uff11 * * * *",
    "\u0661 * * * *",
    "1_0 * * * *",
    "+1 * * * *",
    "0x1 * * * *",
    "1.5 * * * *",
    "1\u00a0* * * *",
    "99999999999999999999999 * * * *",
    "*/" + "9" * 5000 + " * * * *",
    "@reboot",
    "@every 5m",
    "@ * * * *",
    "0 0 30 2 *",
    "0 0 31 2,4,6,9,11 *",
    "0 0 30-31 2 */2",
    "0 0 31 4 *",
]


@pytest.mark.parametrize("expression", INVALID_EXPRESSIONS)
def test_invalid_expressions(expression: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        CronSchedule(expression, "Europe/Paris")
    assert info.value.field == "schedule.cron"
    assert isinstance(info.value, InvalidInput)


@pytest.mark.parametrize(
    "zone", ["", "Mars/Olympus", "America", "America/", "../etc/passwd", "/etc/passwd", "UTC\x00", "x" * 5000]
)
def test_unknown_zone(zone: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        CronSchedule("* * * * *", zone)
    assert info.value.field == "schedule.timeZone"
    with pytest.raises(InvalidSchedule) as info:
        load_zone(zone, field="job.zone")
    assert info.value.field == "job.zone"


def test_known_zone() -> None:
    assert load_zone("Australia/Lord_Howe") == ZoneInfo("Australia/Lord_Howe")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_fuzz_any_text_is_valid_or_invalid_schedule(expression: str) -> None:
    _valid_or_invalid(expression)


CRONISH = st.text(alphabet="0123456789*/-, \tLW#?@JANFEBMONSUNsatdecxyz\u00a0\u0661", max_size=40)


@settings(max_examples=500, deadline=None)
@given(st.one_of(CRONISH, st.lists(CRONISH, min_size=5, max_size=5).map(" ".join)))
def test_fuzz_cron_like_text_is_valid_or_invalid_schedule(expression: str) -> None:
    _valid_or_invalid(expression)


def _valid_or_invalid(expression: str) -> None:
    try:
        schedule = CronSchedule(expression, "America/New_York")
    except InvalidSchedule as exc:
        assert exc.field == "schedule.cron"
        return
    # A schedule that constructs always has a next run.
    got = schedule.next_after(utc("2026-03-08 06:00"))
    assert got > utc("2026-03-08 06:00")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_fuzz_zone_names(zone: str) -> None:
    try:
        load_zone(zone)
    except InvalidSchedule as exc:
        assert exc.field == "schedule.timeZone"
