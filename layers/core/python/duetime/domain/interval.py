"""Interval schedules: runs every fixed span of elapsed time from an anchor instant, immune to DST."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from duetime.domain.errors import InvalidSchedule

EVERY_FIELD = "schedule.every"
# Whole seconds from one (as cron's seconds field); a year bounds the work of a preview.
MIN_INTERVAL = timedelta(seconds=1)
MAX_INTERVAL = timedelta(days=366)

# "90m", "1h30m", "2h", "1d12h", "30s", "1m30s": days, hours, minutes and seconds, each at most once and in
# that order.
_COMPACT = re.compile(r"(?:(?P<d>[0-9]{1,6})d)?(?:(?P<h>[0-9]{1,6})h)?(?:(?P<m>[0-9]{1,6})m)?(?:(?P<s>[0-9]{1,6})s)?")
# EventBridge's spelling: rate(90 minutes), rate(1 hour), rate(2 days); and rate(30 seconds).
_RATE = re.compile(r"rate\((?P<n>[0-9]{1,6}) (?P<unit>seconds?|minutes?|hours?|days?)\)")
_UNIT = {
    "second": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
}


def parse_every(text: str) -> timedelta:
    """The span of an `every` value ("90m", "1h30m", "30s", "rate(90 minutes)"); InvalidSchedule naming the
    field."""
    compact = _COMPACT.fullmatch(text) if isinstance(text, str) else None
    rate = _RATE.fullmatch(text) if isinstance(text, str) else None
    if compact is not None and any(compact.groupdict().values()):
        d, h, m, sec = (int(compact[unit] or 0) for unit in "dhms")
        span = timedelta(days=d, hours=h, minutes=m, seconds=sec)
    elif rate is not None:
        span = int(rate["n"]) * _UNIT[rate["unit"].removesuffix("s")]
    else:
        raise InvalidSchedule(
            f"invalid interval {text!r}: write it as 30s, 90m, 1h30m, 2d or rate(90 minutes)"
            " (seconds, minutes, hours, days)",
            field=EVERY_FIELD,
        )
    if not MIN_INTERVAL <= span <= MAX_INTERVAL:
        raise InvalidSchedule(f"interval {text!r} must be from 1 second to 366 days", field=EVERY_FIELD)
    return span


class IntervalSchedule:
    """Slots at `start_at + k * every` (k = 0, 1, ...) in elapsed time: the wall clock never moves them."""

    def __init__(self, every: str, start_at: datetime) -> None:
        if start_at.tzinfo is None or start_at.utcoffset() is None:
            raise ValueError("IntervalSchedule needs a timezone-aware start_at")
        self.every = every
        self.interval = parse_every(every)
        self.start_at = start_at.astimezone(UTC)

    def next_after(self, after: datetime) -> datetime:
        """The first slot strictly after `after` (aware), in UTC."""
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError("next_after needs a timezone-aware datetime")
        if after < self.start_at:
            return self.start_at
        # Integer arithmetic on timedeltas (microseconds): no drift however many intervals have passed.
        k = (after - self.start_at) // self.interval + 1
        try:
            return self.start_at + k * self.interval
        except OverflowError as exc:
            raise InvalidSchedule(
                f"interval {self.every!r} has no run after {after.isoformat()}", field=EVERY_FIELD
            ) from exc

    def runs(self, after: datetime, count: int) -> list[datetime]:
        """The next `count` slots strictly after `after`, in UTC."""
        out: list[datetime] = []
        current = after
        for _ in range(count):
            current = self.next_after(current)
            out.append(current)
        return out


def every_words(text: str) -> str:
    """An `every` value in words, as the console and the CLI show it: "every minute", "every 15 minutes",
    "every 1 hour 30 minutes", "every 5 seconds" (one of a unit reads as the unit alone). Text that is not an
    interval is shown as given."""
    try:
        span = parse_every(text)
    except InvalidSchedule:
        return f"every {text}"
    seconds = int(span.total_seconds())
    parts = [
        (seconds // 86400, "day"),
        (seconds // 3600 % 24, "hour"),
        (seconds // 60 % 60, "minute"),
        (seconds % 60, "second"),
    ]
    named = [(n, unit) for n, unit in parts if n]
    if len(named) == 1 and named[0][0] == 1:
        return f"every {named[0][1]}"
    return "every " + " ".join(f"{n} {unit}{'' if n == 1 else 's'}" for n, unit in named)
