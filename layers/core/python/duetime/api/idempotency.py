"""The Idempotency-Key of POST /jobs, and why duetime keeps it in the job's own transaction.

The same key with the same body returns the first job; with another body it is refused (422); any
number of concurrent duplicates create one job. The key is written by `duetime.service.jobs.submit_job`
as a control-table record `idem#<owner>#<key>` (with a hash of the validated body and a 24-hour TTL)
in the same DynamoDB transaction that writes the job and its first execution.

Why not Powertools' idempotency utility (DynamoDB persistence)? Because a job and its first execution
must be atomic with the key, and the utility cannot give that. It writes its record in a write of its
own before the handler runs ("in progress") and another after it ("completed"), so:
- a crash after the job is written but before "completed" leaves a job whose key expires as if unused,
  and the client's retry then creates a second job;
- a crash before the job is written leaves the key "in progress" with no job behind it;
- a concurrent duplicate gets an "already in progress" error instead of the first job.
With the key inside the job's transaction there is no such window: either the key, the job and its
first execution all exist, or none does; a concurrent duplicate fails the transaction's condition on
the key and reads back the winner's job. It also costs no write beyond the transaction itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from duetime.api.parsing import header
from duetime.definitions import MAX_IDEMPOTENCY_KEY_CHARS
from duetime.domain.errors import InvalidInput

HEADER = "Idempotency-Key"
MAX_KEY_CHARS = MAX_IDEMPOTENCY_KEY_CHARS


def idempotency_key(headers: Mapping[str, str] | None) -> str | None:
    """The request's Idempotency-Key (header names are case-insensitive), or None if it has none.

    Raises InvalidInput naming the header if it is empty, longer than 255 characters or not printable ASCII.
    """
    value = header(headers, HEADER)
    if value is None:
        return None
    if not 1 <= len(value) <= MAX_KEY_CHARS or not all(" " <= c <= "~" for c in value):
        raise InvalidInput(f"{HEADER} must be 1..{MAX_KEY_CHARS} printable ASCII characters", field=HEADER)
    return value
