"""The one HTTP client of the tests: a requests session on a duetime API with one caller's bearer token."""

from __future__ import annotations

import time
from typing import Any

import requests
from duetime.local.http_bridge import READ_TIMEOUT_SECONDS

TIMEOUT_SECONDS = 30
# The local API closes a kept-alive connection idle READ_TIMEOUT_SECONDS (duetime/local/http_bridge.py). A request
# sent on one idle about that long races the close and finds it shut (RemoteDisconnected): a connection idle half
# that long is not reused.
REUSE_IDLE_SECONDS = READ_TIMEOUT_SECONDS / 2


class Api:
    """A caller of a duetime API over real HTTP (`duetime local`, or the API bridge of an integration test).

    `token=None` sends no Authorization header. Every method returns the `requests.Response` as it came."""

    def __init__(self, base_url: str, token: str | None, timeout: float = TIMEOUT_SECONDS) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self._last_used = time.monotonic()
        if token is not None:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self.timeout)
        if time.monotonic() - self._last_used > REUSE_IDLE_SECONDS:
            self.session.close()  # its pooled connections: the next request opens a fresh one
        try:
            return self.session.request(method, self.base_url + path, **kwargs)
        finally:
            self._last_used = time.monotonic()

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("PUT", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("DELETE", path, **kwargs)

    def fork(self) -> Api:
        """The same caller on a session of its own (requests sessions are not shared across threads)."""
        return Api(self.base_url, None, self.timeout).with_headers(self.session.headers)

    def with_headers(self, headers: Any) -> Api:
        self.session.headers.update(headers)
        return self
