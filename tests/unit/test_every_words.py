"""An interval in words, as the console and the CLI show it: one of a unit reads as the unit alone."""

from __future__ import annotations

import pytest
from duetime.cli.client import schedule_text
from duetime.domain.interval import every_words


@pytest.mark.parametrize(
    ("every", "words"),
    [
        ("1m", "every minute"),
        ("rate(1 minutes)", "every minute"),
        ("rate(1 minute)", "every minute"),
        ("15m", "every 15 minutes"),
        ("60m", "every hour"),
        ("1h30m", "every 1 hour 30 minutes"),
        ("2h", "every 2 hours"),
        ("1d", "every day"),
        ("rate(2 days)", "every 2 days"),
        ("1d1h1m", "every 1 day 1 hour 1 minute"),
        ("1s", "every second"),
        ("rate(1 second)", "every second"),
        ("5s", "every 5 seconds"),
        ("60s", "every minute"),
        ("1m30s", "every 1 minute 30 seconds"),
        ("1d1s", "every 1 day 1 second"),
        ("soon", "every soon"),
    ],
)
def test_an_interval_reads_in_words(every, words):
    assert every_words(every) == words


def test_the_cli_shows_a_one_minute_interval_as_every_minute():
    text = schedule_text({"every": "1m", "startAt": "2026-12-01T09:00:00Z"})
    assert text == "every minute from 2026-12-01T09:00:00Z"
