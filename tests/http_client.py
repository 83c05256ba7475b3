"""The one HTTP client of the tests: a requests session on a duetime API with one caller's bearer token."""

from __future__ import annotations

from typing import Any

import requests

TIMEOUT_SECONDS = 30


class Api:
    """A caller of a duetime API over real HTTP (`duetime local`, or the API bridge of an integration test).

    `token=None` sends no Authorization header. Every method returns the `requests.Response` as it came."""

    def __init__(self, base_url: str, token: str | None, timeout: float = TIMEOUT_SECONDS) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        if token is not None:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", self.timeout)
        return self.session.request(method, self.base_url + path, **kwargs)

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
