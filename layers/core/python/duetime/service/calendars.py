"""Named calendars: an owner's lists of dates that its jobs exclude by name (`calendar:<name>` entries)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from duetime.definitions import MAX_CALENDARS_PER_OWNER
from duetime.domain.errors import Conflict, InvalidInput, NotFound
from duetime.domain.exclusions import CALENDAR_PREFIX, Calendar, calendars_named, check_calendar_name
from duetime.domain.models import ENDED_JOB_STATUSES, Job, to_ms
from duetime.service.context import Ports

# Jobs named in a 409 for deleting a calendar in use (the message stays short; the count is exact).
JOBS_NAMED_IN_CONFLICT = 10
JOB_PAGE = 100


def checked_name(name: str) -> str:
    try:
        return check_calendar_name(name)
    except ValueError as exc:
        raise NotFound(f"calendar {name[:80]!r} not found", field="name") from exc


def list_calendars(ports: Ports, owner: str) -> list[Calendar]:
    """The owner's calendars, by name."""
    return sorted(ports.store.get_calendars(owner).values(), key=lambda c: c.name)


def get_calendar(ports: Ports, owner: str, name: str) -> Calendar:
    calendar = ports.store.get_calendars(owner).get(checked_name(name))
    if calendar is None:
        raise NotFound(f"calendar {name!r} not found", field="name")
    return calendar


def put_calendar(ports: Ports, owner: str, name: str, dates: Sequence[str]) -> tuple[Calendar, bool]:
    """Create or replace a calendar (its dates are already validated); True if it is new. Jobs that name it
    read the new dates the next time dispatch plans their slots: slots already sent are not recalled."""
    try:
        check_calendar_name(name)
    except ValueError as exc:  # a name that could never be read back: refused, not created
        raise InvalidInput(str(exc), field="name") from exc
    existing = ports.store.get_calendars(owner)
    if name not in existing and len(existing) >= MAX_CALENDARS_PER_OWNER:
        raise Conflict(f"an owner may keep at most {MAX_CALENDARS_PER_OWNER} calendars", field="name")
    calendar = Calendar(name=name, dates=tuple(dates), updated_ms=to_ms(ports.clock()))
    return calendar, ports.store.put_calendar(owner, calendar)


def delete_calendar(ports: Ports, owner: str, name: str) -> None:
    """Delete a calendar that no job (not cancelled) names; else 409 listing those jobs: a job's `exclude`
    cannot be edited, so they are cancelled (and resubmitted without it) first."""
    get_calendar(ports, owner, name)
    users = [job.job_id for job in jobs_naming(ports, owner, name)]
    if users:
        shown = shown_jobs(users)
        raise Conflict(f"calendar {name!r} is excluded by {len(users)} job(s) not cancelled: {shown}", field="name")
    if not ports.store.delete_calendar(owner, name):
        raise NotFound(f"calendar {name!r} not found", field="name")


def live_jobs_where(ports: Ports, owner: str, names_it: Callable[[Job], bool]) -> Iterator[Job]:
    """The owner's jobs, neither cancelled nor completed, for which `names_it` holds (a page at a time):
    what refuses the deletion of a calendar or a limit they still name."""
    cursor: str | None = None
    while True:
        page = ports.store.list_jobs(owner, JOB_PAGE, cursor)
        yield from (job for job in page.items if job.status not in ENDED_JOB_STATUSES and names_it(job))
        if page.cursor is None:
            return
        cursor = page.cursor


def shown_jobs(job_ids: list[str]) -> str:
    """The first JOBS_NAMED_IN_CONFLICT of `job_ids`, for a 409 that lists them."""
    return ", ".join(job_ids[:JOBS_NAMED_IN_CONFLICT]) + (" ..." if len(job_ids) > JOBS_NAMED_IN_CONFLICT else "")


def jobs_naming(ports: Ports, owner: str, name: str) -> Iterator[Job]:
    """The owner's jobs, not cancelled or completed, whose `exclude` names calendar `name`."""
    return live_jobs_where(ports, owner, lambda job: name in calendars_named(job.exclude))


def check_references(ports: Ports, owner: str, exclude: Sequence[str]) -> None:
    """Every calendar `exclude` names exists for this owner (one read, only if it names any)."""
    referenced_calendars(ports, owner, exclude)


def referenced_calendars(ports: Ports, owner: str, exclude: Sequence[str]) -> dict[str, Calendar] | None:
    """The owner's calendars if `exclude` names any (one read), else None; raises InvalidInput naming
    `exclude` if one it names does not exist."""
    named = calendars_named(exclude)
    if not named:
        return None
    calendars = ports.store.get_calendars(owner)
    missing = [n for n in named if n not in calendars]
    if missing:
        raise InvalidInput(
            f"exclude names no calendar {', '.join(CALENDAR_PREFIX + n for n in missing)} of this owner",
            field="exclude",
        )
    return calendars


class CalendarCache:
    """The calendars of each owner, read once per dispatch pass (or request) and only for jobs naming one."""

    def __init__(self, ports: Ports) -> None:
        self.ports = ports
        self.by_owner: dict[str, dict[str, Calendar]] = {}

    def of(self, job: Job) -> dict[str, Calendar] | None:
        if not calendars_named(job.exclude):
            return None
        if job.owner not in self.by_owner:
            self.by_owner[job.owner] = self.ports.store.get_calendars(job.owner)
        return self.by_owner[job.owner]
