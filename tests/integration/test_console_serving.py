"""The local HTTP bridge serves the web console's static files at /console, and every other path to the API."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from duetime.console import STATIC_DIR, sign_in_link
from duetime.local.http_bridge import ApiServer


def api_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Stands in for the API handler: answers with the path it was given, so a test sees what reached it."""
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps(event["path"])}


@pytest.fixture
def server() -> Iterator[ApiServer]:
    running = ApiServer(api_handler, port=0).start()
    yield running
    running.stop()


def get(server: ApiServer, path: str) -> tuple[int, dict[str, str], bytes]:
    host, port = server.server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=10)
    try:
        connection.request("GET", path)  # sent as written: http.client does not tidy `..` away
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_the_page_script_and_stylesheet_have_their_types_and_a_content_security_policy(server: ApiServer) -> None:
    for path, content_type, file in [
        ("/console/", "text/html", "index.html"),
        ("/console/index.html", "text/html", "index.html"),
        ("/console/console.js", "text/javascript", "console.js"),
        ("/console/console.css", "text/css", "console.css"),
    ]:
        status, headers, body = get(server, path)
        assert status == 200, path
        assert headers["Content-Type"].startswith(content_type), path
        assert body == (STATIC_DIR / file).read_bytes()
        assert "script-src 'self'" in headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"


def test_every_module_the_page_imports_is_served_as_javascript_under_a_policy_that_runs_no_inline_script(
    server: ApiServer,
) -> None:
    # The console is native ES modules: index.html loads console.js as a module, which imports the others by
    # relative path. A module is refused unless served with a JavaScript type (nosniff), from 'self'.
    index = (STATIC_DIR / "index.html").read_text()
    assert '<script type="module" src="console.js"></script>' in index
    imported = {"console.js"}
    for module in sorted(STATIC_DIR.glob("*.js")):
        imported |= set(re.findall(r'^import [^;]* from "\./([\w-]+\.js)";$', module.read_text(), re.MULTILINE))
    assert imported == {module.name for module in STATIC_DIR.glob("*.js")}  # each file is reached, none missing
    for name in sorted(imported):
        status, headers, body = get(server, f"/console/{name}")
        assert status == 200, name
        assert headers["Content-Type"].startswith("text/javascript"), name
        assert body == (STATIC_DIR / name).read_bytes()
        policy = dict(directive.strip().split(" ", 1) for directive in headers["Content-Security-Policy"].split(";"))
        assert policy["script-src"] == "'self'", name
        assert "unsafe-inline" not in headers["Content-Security-Policy"]


def test_the_bare_path_redirects_so_relative_links_resolve(server: ApiServer) -> None:
    status, headers, _ = get(server, "/console")
    assert status == 301 and headers["Location"] == "/console/"


@pytest.mark.parametrize(
    "path",
    [
        "/console/../../../etc/passwd",
        "/console/%2e%2e/%2e%2e/pyproject.toml",
        "/console/../__init__.py",
        "/console/../../../../../../docs/console-job.png",  # a file of a served type, outside the folder
        "/console/nothing.js",
        "/console/.hidden.js",
    ],
)
def test_nothing_outside_the_static_folder_is_served(server: ApiServer, path: str) -> None:
    status, headers, body = get(server, path)
    assert status == 404, path
    assert b"import" not in body and b"root:" not in body


def test_every_other_path_still_reaches_the_api(server: ApiServer) -> None:
    for path in ("/jobs", "/consoles", "/openapi.json"):
        status, _, body = get(server, path)
        assert status == 200 and json.loads(body) == path


def test_the_sign_in_link_carries_the_token_in_the_fragment() -> None:
    assert sign_in_link("http://127.0.0.1:8080", "abc.def") == "http://127.0.0.1:8080/console/#token=abc.def"
