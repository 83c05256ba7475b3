"""The use cases of the /calendars routes: an owner's named calendars of dates a schedule may skip."""

from __future__ import annotations

from duetime.api.models import (
    CalendarList,
    CalendarRequest,
    CalendarResponse,
)
from duetime.api.routing import Call, Reply
from duetime.service import calendars as calendar_cases


def list_calendars(call: Call) -> Reply:
    calendars = calendar_cases.list_calendars(call.ports, call.owner)
    return Reply(200, CalendarList(calendars=[CalendarResponse.of(c) for c in calendars]))


def get_calendar(call: Call) -> Reply:
    return Reply(200, CalendarResponse.of(calendar_cases.get_calendar(call.ports, call.owner, call.path["name"])))


def put_calendar(call: Call) -> Reply:
    dates = call.body_as(CalendarRequest).dates
    calendar, created = calendar_cases.put_calendar(call.ports, call.owner, call.path["name"], dates)
    return Reply(201 if created else 200, CalendarResponse.of(calendar))


def delete_calendar(call: Call) -> Reply:
    calendar_cases.delete_calendar(call.ports, call.owner, call.path["name"])
    return Reply(204)
