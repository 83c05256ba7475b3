"""Domain errors; each maps to one HTTP status in one place (duetime.api.app.STATUS_BY_ERROR)."""

from __future__ import annotations


class DuetimeError(Exception):
    """Base of every error duetime reports to a caller."""

    code = "error"
    retry_after: int | None = None  # seconds after which the same request may succeed (Retry-After)

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(DuetimeError):
    """The request is malformed or a field is out of range; `field` names it."""

    code = "invalid_input"


class InvalidSchedule(InvalidInput):
    """A cron expression, time zone or `at` time that cannot be scheduled."""

    code = "invalid_schedule"


class Unauthorized(DuetimeError):
    """No bearer token, or one that does not verify."""

    code = "unauthorized"


class Forbidden(DuetimeError):
    """The caller is known but not granted what it asked for (a handler outside its grants)."""

    code = "forbidden"


class NotFound(DuetimeError):
    """No such job or execution for this caller (another owner's is not found either)."""

    code = "not_found"


class Conflict(DuetimeError):
    """The change does not apply to the current state (a terminal execution, a cancelled job...)."""

    code = "conflict"


class StaleAttempt(Conflict):
    """A worker wrote with an attempt number that no longer holds the execution: it is fenced out."""

    code = "stale_attempt"


class IdempotencyMismatch(DuetimeError):
    """An Idempotency-Key reused with a different request body."""

    code = "idempotency_key_reused"


class QuotaExceeded(DuetimeError):
    """The owner is at one of its quotas (`field` names it); the request may succeed after `retry_after`
    seconds (a rate's next window), or once the owner has deleted jobs (active jobs)."""

    code = "quota_exceeded"

    def __init__(self, message: str, field: str, retry_after: int) -> None:
        super().__init__(message, field)
        self.retry_after = retry_after


class Unavailable(DuetimeError):
    """The store could not take the request in time (on SQLite, another process held the write lock past
    the busy timeout, as one frozen by SIGSTOP mid-write does). The write that waited was not made; the
    same request may succeed after `retry_after` seconds."""

    code = "unavailable"

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after
