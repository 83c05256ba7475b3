"""A small HTTP client of duetime's API (docs/api.md), on the standard library only."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

API_URL_ENV = "DUETIME_API_URL"
# POST /jobs/batch takes this many jobs a request (MAX_BATCH_JOBS).
BATCH_JOBS = 500
TOKEN_ENV = "DUETIME_TOKEN"


class ApiError(Exception):
    """An error answer of the API (or no answer at all, with status 0)."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field


class ConfigError(Exception):
    """The client was not told where the API is or who is calling."""


def resolve_connection(
    api_url: str | None = None,
    token: str | None = None,
    data_dir: str | Path = ".duetime",
    owner: str | None = None,
) -> tuple[str, str]:
    """(API URL, bearer token): each from the argument, else the environment (DUETIME_API_URL,
    DUETIME_TOKEN), else a running `duetime local`'s data dir (its apiUrl, and a token signed with its
    jwtSecret for `owner`, by default the local first user). Raises ConfigError if one is missing."""
    api_url = api_url or os.environ.get(API_URL_ENV)
    token = token or os.environ.get(TOKEN_ENV)
    if not api_url or not token:
        # Imported only here: a client given its URL and token loads nothing beyond the standard library.
        from duetime.api.auth import issue_token
        from duetime.definitions import LOCAL_FIRST_USER
        from duetime.local.state import load_connection

        try:
            state = load_connection(data_dir)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"no API URL or token: give --api-url and --token, set {API_URL_ENV} and {TOKEN_ENV}, "
                f"or run `duetime local --data-dir {data_dir}` ({exc})"
            ) from exc
        api_url = api_url or state.api_url
        # The data dir's API refuses a token naming another audience (its instance id) or none.
        token = token or issue_token(state.jwt_secret, owner or LOCAL_FIRST_USER, audience=state.instance_id)
    return api_url.rstrip("/"), token


class DuetimeClient:
    """Calls the API as the owner of `token`; every method returns the decoded JSON or raises ApiError."""

    def __init__(self, api_url: str, token: str, timeout: float = 30.0) -> None:
        self.api_url, self.token, self.timeout = api_url.rstrip("/"), token, timeout

    @classmethod
    def connect(
        cls,
        api_url: str | None = None,
        token: str | None = None,
        data_dir: str | Path = ".duetime",
        owner: str | None = None,
    ) -> DuetimeClient:
        return cls(*resolve_connection(api_url, token, data_dir, owner))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        # A list value is a repeated parameter (GET /jobs?tag=a:1&tag=b:2).
        url = self.api_url + path + (f"?{urllib.parse.urlencode(params, doseq=True)}" if params else "")
        sent = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise _api_error(exc.code, exc.read().decode(errors="replace")) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(0, "unreachable", f"cannot reach {self.api_url}: {exc}") from exc
        return json.loads(text) if text else None

    # -- jobs ---------------------------------------------------------------------------------

    def create_job(self, spec: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return dict(self.request("POST", "/jobs", spec, headers=headers))

    def create_jobs(
        self, specs: Sequence[dict[str, Any]], batch_size: int = BATCH_JOBS, minimal: bool = False
    ) -> list[dict[str, Any]]:
        """Many jobs through POST /jobs/batch, `batch_size` a request: one result a job, in order, each
        {"status": 201 or 200, "job"} or {"status": 4xx, "error", "retryAfter"?}; with `minimal`
        (`Prefer: return=minimal`), {"status", "jobId", "nextRunAt"} in place of "job". A spec may carry its
        own `idempotencyKey`, which makes sending it again after a lost answer safe."""
        headers = {"Prefer": "return=minimal"} if minimal else None
        results: list[dict[str, Any]] = []
        for start in range(0, len(specs), batch_size):
            body = {"jobs": list(specs[start : start + batch_size])}
            answer = self.request("POST", "/jobs/batch", body, headers=headers)
            results.extend(answer["results"])
        return results

    def list_jobs(
        self,
        limit: int | None = None,
        cursor: str | None = None,
        status: str | None = None,
        handler: str | None = None,
        tags: Sequence[str] = (),
    ) -> dict[str, Any]:
        """A page of the caller's jobs, filtered server-side by status, handler and `key:value` tags."""
        query = {"limit": limit, "cursor": cursor, "status": status, "handler": handler, "tag": list(tags) or None}
        return dict(self.request("GET", "/jobs", query=query))

    def iter_jobs(
        self, page_size: int = 100, status: str | None = None, handler: str | None = None, tags: Sequence[str] = ()
    ) -> Iterator[dict[str, Any]]:
        """Every job of the caller (matching the filters), newest first, following nextCursor."""
        cursor = None
        while True:
            page = self.list_jobs(page_size, cursor, status, handler, tags)
            yield from page["jobs"]
            cursor = page.get("nextCursor")
            if not cursor:
                return

    def get_job(self, job_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/jobs/{_segment(job_id)}"))

    def pause_job(self, job_id: str, note: str | None = None) -> dict[str, Any]:
        body = {"status": "paused", **({"note": note} if note else {})}
        return dict(self.request("PATCH", f"/jobs/{_segment(job_id)}", body))

    def resume_job(self, job_id: str, note: str | None = None) -> dict[str, Any]:
        body = {"status": "active", **({"note": note} if note else {})}
        return dict(self.request("PATCH", f"/jobs/{_segment(job_id)}", body))

    def edit_job(self, job_id: str, version: int, changes: dict[str, Any]) -> dict[str, Any]:
        """Replace the given spec fields of the job, if it is still at `version` (else ApiError 409)."""
        body = {**changes, "version": version}
        return dict(self.request("PATCH", f"/jobs/{_segment(job_id)}", body))

    def cancel_job(self, job_id: str) -> None:
        self.request("DELETE", f"/jobs/{_segment(job_id)}")

    def run_now(self, job_id: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run the job now; a `payload` replaces the job's for this execution only."""
        body = None if payload is None else {"payload": payload}
        return dict(self.request("POST", f"/jobs/{_segment(job_id)}/run", body))

    def list_executions(self, job_id: str, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        query = {"limit": limit, "cursor": cursor}
        return dict(self.request("GET", f"/jobs/{_segment(job_id)}/executions", query=query))

    def preview(self, schedule: dict[str, Any]) -> list[str]:
        return list(self.request("POST", "/schedules/preview", schedule)["runs"])

    # -- failed executions --------------------------------------------------------------------

    def retry_execution(self, execution_id: str) -> dict[str, Any]:
        """Put a failed execution back, due now, with a fresh retry budget."""
        return dict(self.request("POST", f"/executions/{_segment(execution_id)}/retry"))

    def list_dead_letters(self, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """A page of the caller's executions that failed for good, newest first."""
        return dict(self.request("GET", "/dead-letters", query={"limit": limit, "cursor": cursor}))

    def bulk_jobs(self, request: dict[str, Any]) -> dict[str, Any]:
        """POST /jobs/bulk once: {"action", "jobIds" | "filter", "dryRun", "limit", "cursor", "note"}."""
        return dict(self.request("POST", "/jobs/bulk", request))

    def iter_bulk_jobs(self, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """POST /jobs/bulk, then again from each answer's nextCursor until none is left (one answer each)."""
        while True:
            answer = self.bulk_jobs(request)
            yield answer
            if request.get("dryRun") or not answer.get("nextCursor"):
                return
            request = {**request, "cursor": answer["nextCursor"]}

    def redrive(self, selection: dict[str, Any]) -> dict[str, Any]:
        """Retry failed executions: {"executionIds": [...]} or a filter (jobId, failedAfter, failedBefore, all)."""
        return dict(self.request("POST", "/dead-letters/redrive", selection))

    # -- named calendars ------------------------------------------------------------------------

    def list_calendars(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/calendars")["calendars"])

    def get_calendar(self, name: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/calendars/{_segment(name)}"))

    def put_calendar(self, name: str, dates: list[str]) -> dict[str, Any]:
        return dict(self.request("PUT", f"/calendars/{_segment(name)}", {"dates": dates}))

    def delete_calendar(self, name: str) -> None:
        self.request("DELETE", f"/calendars/{_segment(name)}")

    def backfill(self, job_id: str, start: str, end: str, overlap: str | None = None) -> dict[str, Any]:
        """Run every slot of the job's schedule in [start, end) once (POST /jobs/{jobId}/backfill)."""
        body = {"from": start, "to": end, **({"overlap": overlap} if overlap else {})}
        return dict(self.request("POST", f"/jobs/{_segment(job_id)}/backfill", body))

    # -- named rate limits and concurrency caps -------------------------------------------------------

    def list_limits(self) -> list[dict[str, Any]]:
        return list(self.request("GET", "/limits")["limits"])

    def get_limit(self, name: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/limits/{_segment(name)}"))

    def put_limit(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.request("PUT", f"/limits/{_segment(name)}", body))

    def delete_limit(self, name: str) -> None:
        self.request("DELETE", f"/limits/{_segment(name)}")

    def get_execution(self, execution_id: str) -> dict[str, Any]:
        """One of the caller's executions: status, attempts and last checkpoint (GET /executions/{id})."""
        return dict(self.request("GET", f"/executions/{_segment(execution_id)}"))


def _segment(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def _api_error(status: int, text: str) -> ApiError:
    try:
        error = json.loads(text)["error"]
        return ApiError(status, str(error["code"]), str(error["message"]), error.get("field"))
    except (ValueError, KeyError, TypeError):
        return ApiError(status, "http_error", text[:500] or f"HTTP {status}")
