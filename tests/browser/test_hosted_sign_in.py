"""The console's sign-in on AWS (authorization code with PKCE through the user pool's hosted UI), against a
stand-in for the hosted UI that checks what Cognito checks: the client, the redirect URI, state and S256."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from duetime.console import console_file

from tests.browser.test_console import css, wait_for

CLIENT_ID = "console-client"
ID_TOKEN = "id-token-" + secrets.token_hex(8)


class HostedUi:
    """Serves the console, its config.json naming this server as the hosted UI, the two OAuth routes, and a
    GET /jobs that answers only the id token it issued. `exchanges` records each token request's verdict."""

    def __init__(self) -> None:
        self.codes: dict[str, dict[str, str]] = {}
        self.exchanges: list[str] = []
        ui = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _json(self, status: int, value: Any) -> None:
                self._send(status, json.dumps(value).encode(), {"Content-Type": "application/json"})

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if parts.path == "/console/config.json":
                    self._json(200, {"signIn": {"hostedUi": ui.url, "clientId": CLIENT_ID}})
                elif parts.path == "/oauth2/authorize":
                    ui.authorize(self, query)
                elif parts.path == "/jobs":
                    if self.headers.get("Authorization") == f"Bearer {ID_TOKEN}":
                        self._json(200, {"jobs": [], "nextCursor": None})
                    else:
                        self._json(401, {"error": {"code": "unauthorized", "message": "bad token"}})
                elif (found := console_file(parts.path)) is not None:
                    self._send(found.status, found.body, found.headers)
                else:
                    self._json(404, {"error": {"code": "not_found", "message": "no such route"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                if urlsplit(self.path).path != "/oauth2/token":
                    self._json(404, {"error": "not_found"})
                    return
                verdict = ui.exchange(form)
                ui.exchanges.append(verdict)
                if verdict == "ok":
                    self._json(200, {"id_token": ID_TOKEN, "access_token": "a", "token_type": "Bearer"})
                else:
                    self._json(400, {"error": "invalid_grant", "error_description": verdict})

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def authorize(self, request: BaseHTTPRequestHandler, query: dict[str, str]) -> None:
        expected = {"response_type": "code", "client_id": CLIENT_ID, "code_challenge_method": "S256"}
        redirect = query.get("redirect_uri", "")
        if any(query.get(k) != v for k, v in expected.items()) or redirect != f"{self.url}/console/":
            request.send_response(400)
            request.end_headers()
            return
        code = secrets.token_hex(8)
        self.codes[code] = {"challenge": query["code_challenge"], "redirect_uri": redirect}
        request.send_response(302)
        request.send_header("Location", f"{redirect}?{urlencode({'code': code, 'state': query['state']})}")
        request.send_header("Content-Length", "0")
        request.end_headers()

    def exchange(self, form: dict[str, str]) -> str:
        issued = self.codes.pop(form.get("code", ""), None)
        if issued is None or form.get("grant_type") != "authorization_code" or form.get("client_id") != CLIENT_ID:
            return "unknown code or client"
        if form.get("redirect_uri") != issued["redirect_uri"]:
            return "redirect_uri differs"
        digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != issued["challenge"]:
            return "code_verifier does not match the S256 challenge"
        return "ok"


@pytest.fixture
def hosted_ui() -> Iterator[HostedUi]:
    ui = HostedUi()
    ui.thread.start()
    yield ui
    ui.server.shutdown()
    ui.server.server_close()


def test_signing_in_through_the_hosted_ui_with_pkce_calls_the_api_with_the_id_token(
    browser: Any, hosted_ui: HostedUi, screenshot: Any
) -> None:
    browser.get(f"{hosted_ui.url}/console/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{hosted_ui.url}/console/#/signin")
    wait_for(browser, lambda d: d.find_elements("css selector", "#hosted-sign-in"))
    screenshot(browser, "sign-in-hosted")
    css(browser, "#hosted-sign-in").click()
    wait_for(browser, lambda d: "No jobs yet." in css(d, "main").text)
    assert hosted_ui.exchanges == ["ok"]
    assert "code=" not in browser.current_url  # the code is spent and dropped from the address
    assert browser.execute_script("return sessionStorage.getItem('duetime.pkce')") is None
