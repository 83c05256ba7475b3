"""An embedded moto server whose DynamoDB requests are serialized, so conditional writes stay atomic.

It runs in a thread of this process, or (`MotoProcess`) in a process of its own, so that moto's CPU
work and duetime's own run on both cores instead of sharing one interpreter lock.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import BaseWSGIServer, make_server

from duetime.local import moto_speed
from duetime.local.iam import Decision, Role
from duetime.local.iam_requests import LAMBDA_INVOKE, credential_scope, requests_of
from duetime.local.stack_roles import roles_of_table

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]
log = logging.getLogger("duetime.local.iam")
# The routes (behind the secret path) by which `duetime local` gives the server its roles, and tests read what
# was denied.
IAM_ROUTE = "/_duetime/iam"
DENIED_ROUTE = "/_duetime/iam/denied"
# The route by which a local deployment names the functions it runs itself and where it serves their invocations.
LAMBDA_ROUTE = "/_duetime/lambda"
# The route that reads how many requests the server has served, by operation (every caller's: the functions' too).
CALLS_ROUTE = "/_duetime/calls"
# Long enough for any invocation (Lambda's 15 minutes): the caller's own client decides when to give up.
RELAY_TIMEOUT_SECONDS = 960


class RememberingDispatcher(DomainDispatcherApplication):
    """moto's dispatcher, remembering the backend of each host: moto resolves a request's host by listing its own
    package folder on disk (a directory read and a stat a service), twice a request here, which was a fifth of
    the server's CPU with `duetime local` idle. Hosts are few (ours, and the one named by each service's
    requests), and moto's answer for a host never changes; it asks under its own lock."""

    def __init__(self, create_app: Any) -> None:
        super().__init__(create_app)
        self.backend_of_host: dict[str | None, Any] = {}

    def get_backend_for_host(self, host: str | None) -> Any:
        if host not in self.backend_of_host:
            self.backend_of_host[host] = super().get_backend_for_host(host)
        return self.backend_of_host[host]


class SerializedDynamoDB:
    """WSGI middleware: one DynamoDB request at a time (moto's backends take no locks). SQS requests are
    not serialized: a long poll blocks inside moto waiting for a send, which must still get through. It counts
    every request by operation ("dynamodb:PutItem", "sqs:ReceiveMessage"), and a GET of CALLS_ROUTE reads them."""

    def __init__(self, app: Callable[[Environ, StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.calls: dict[str, int] = {}
        self._count_lock = threading.Lock()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target and environ.get("PATH_INFO") == CALLS_ROUTE:
            with self._count_lock:
                return _json(start_response, "200 OK", {"calls": dict(self.calls)})
        with self._count_lock:
            name = operation_name(target) if target else str(environ.get("PATH_INFO", ""))
            self.calls[name] = self.calls.get(name, 0) + 1
        if target.startswith("DynamoDB_"):
            with self.lock:
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


class IamEnforcement:
    """WSGI middleware: a request signed with a role's access key (the emulated functions') is served only if
    that role's policies, as the synthesized template gives them, allow every action on every resource it
    asks for (duetime.local.iam); else it gets the service's AccessDenied error. Requests with any other key
    (the developer's: the CLI, `duetime local` itself, tests) are not checked. The roles are given by a PUT of
    their table (duetime.local.stack_roles.policy_table) to IAM_ROUTE."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.roles: dict[str, Role] = {}
        self.denied: list[dict[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path.startswith(IAM_ROUTE):
            return self._admin(environ, start_response, path)
        scope = credential_scope(str(environ.get("HTTP_AUTHORIZATION", "")))
        role = self.roles.get(scope[0]) if scope else None
        if scope is None or role is None:
            return self.app(environ, start_response)
        body = _read_body(environ)
        headers = {k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")}
        _, region, service = scope
        requests = requests_of(service, region, str(environ.get("REQUEST_METHOD", "")), path, headers, body)
        if requests is None:
            decision, request = Decision(False, "duetime local cannot tell what this request asks for"), None
        else:
            decision, request = role.decide(requests)
        if decision.allowed:
            return self.app(environ, start_response)
        action = request.action if request else f"{service}:?"
        resource = request.resource if request else path
        message = (
            f"User: arn:aws:sts::123456789012:assumed-role/{role.name}/duetime-local is not authorized to perform:"
            f" {action} on resource: {resource} because {decision.reason}"
        )
        log.warning("AccessDenied: %s", message)
        with self._lock:
            self.denied.append({"role": role.name, "action": action, "resource": resource})
        return _access_denied(service, message, start_response)

    def _admin(self, environ: Environ, start_response: StartResponse, path: str) -> Iterable[bytes]:
        if path == IAM_ROUTE and environ.get("REQUEST_METHOD") == "PUT":
            self.roles = roles_of_table(json.loads(_read_body(environ) or b"{}"))
            return _json(start_response, "200 OK", {"roles": len(self.roles)})
        if path == DENIED_ROUTE:
            with self._lock:
                return _json(start_response, "200 OK", {"denied": list(self.denied)})
        return _json(start_response, "404 Not Found", {"message": "no such route"})


class LambdaRelay:
    """WSGI middleware: Lambda's Invoke of a function the local deployment runs itself (duetime.local.deployed,
    each function a process from the cloud assembly) is relayed to where it serves them, and its answer (the
    payload, X-Amz-Function-Error) passed back; every other request goes to moto, which runs no function
    without Docker. It sits behind IamEnforcement: the caller's role must allow lambda:InvokeFunction first.
    The functions are given by a PUT to LAMBDA_ROUTE: {"url": "http://127.0.0.1:PORT", "functions": [names]}."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.url = ""
        self.functions: set[str] = set()

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path, method = str(environ.get("PATH_INFO", "")), str(environ.get("REQUEST_METHOD", ""))
        if path == LAMBDA_ROUTE and method == "PUT":
            given = json.loads(_read_body(environ) or b"{}")
            self.url, self.functions = str(given["url"]), set(given["functions"])
            return _json(start_response, "200 OK", {"functions": len(self.functions)})
        match = LAMBDA_INVOKE.match(path) if method == "POST" else None
        if match is None or function_name_of(match.group(1)) not in self.functions:
            return self.app(environ, start_response)
        request = urllib.request.Request(self.url + path, data=_read_body(environ), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=RELAY_TIMEOUT_SECONDS) as response:
                status, headers, body = response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            status, headers, body = error.code, error.headers, error.read()
        kept = [(k, v) for k, v in headers.items() if k.lower().startswith(("content-type", "x-amz"))]
        start_response(f"{status} {'OK' if status == 200 else 'Error'}", [*kept, ("Content-Length", str(len(body)))])
        return [body]


def operation_name(target: str) -> str:
    """A JSON-protocol request's operation as boto3 names it: "DynamoDB_20120810.PutItem" -> "dynamodb:PutItem",
    "AmazonSQS.ReceiveMessage" -> "sqs:ReceiveMessage"."""
    prefix, _, operation = target.partition(".")
    service = {"AmazonSQS": "sqs"}.get(prefix) or prefix.split("_", 1)[0].lower()
    return f"{service}:{operation}"


def function_name_of(given: str) -> str:
    """A function's name in an Invoke path: a name, `name:qualifier`, or an ARN (...:function:name[:qualifier])."""
    name = unquote(given)
    return name.split(":")[6] if name.startswith("arn:") else name.split(":")[0]


def relay_lambda(endpoint_url: str, url: str, functions: Iterable[str]) -> None:
    """Have the server at `endpoint_url` relay the Invoke of `functions` to `url` (LambdaRelay)."""
    body = json.dumps({"url": url, "functions": sorted(functions)}).encode()
    request = urllib.request.Request(endpoint_url + LAMBDA_ROUTE, data=body, method="PUT")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


def _read_body(environ: Environ) -> bytes:
    """The request body, read and put back for the app behind."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return bytes(body)


def _json(
    start_response: StartResponse, status: str, payload: Any, headers: list[tuple[str, str]] | None = None
) -> list[bytes]:
    headers = headers or []
    data = json.dumps(payload).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *headers])
    return [data]


def _access_denied(service: str, message: str, start_response: StartResponse) -> list[bytes]:
    """The error each protocol answers an unauthorized call with, so botocore raises ClientError AccessDenied*."""
    if service == "dynamodb":
        body = {"__type": "com.amazonaws.dynamodb.v20120810#AccessDeniedException", "message": message}
        return _json(start_response, "400 Bad Request", body)
    if service == "sqs":  # the JSON protocol, with the query protocol's error code in a header
        body = {"__type": "com.amazonaws.sqs#AccessDenied", "message": message}
        return _json(start_response, "403 Forbidden", body, [("x-amzn-query-error", "AccessDenied;Sender")])
    if service in ("sns", "monitoring"):  # the query protocol's XML error
        code = "AuthorizationError" if service == "sns" else "AccessDenied"
        xml = (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{_xml_escape(message)}"
            "</Message></Error><RequestId>duetime-local</RequestId></ErrorResponse>"
        ).encode()
        start_response("403 Forbidden", [("Content-Type", "text/xml"), ("Content-Length", str(len(xml)))])
        return [xml]
    if service == "lambda":
        error_type = [("x-amzn-ErrorType", "AccessDeniedException")]
        return _json(start_response, "403 Forbidden", {"Message": message}, error_type)
    return _json(start_response, "400 Bad Request", {"__type": "AccessDeniedException", "message": message})


def _xml_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class SecretPath:
    """WSGI middleware: only requests whose path starts with `/<secret>` reach moto (the prefix removed).

    moto's server has no authentication, and its `/moto-api/reset` route wipes every table and queue: any
    web page the developer opens could POST to it on loopback. The secret is part of the endpoint URL that
    duetime's boto3 clients are given (botocore keeps an endpoint's path in front of every request path),
    and lives only in this process and the 0600 local.json, so nobody else can address moto at all.
    """

    def __init__(self, app: Callable[[Environ, StartResponse], Iterable[bytes]], secret: str) -> None:
        self.app = app
        self.prefix = f"/{secret}"

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        path = str(environ.get("PATH_INFO", ""))
        if path != self.prefix and not path.startswith(self.prefix + "/"):
            start_response("403 Forbidden", [("Content-Type", "text/plain"), ("Content-Length", "9")])
            return [b"forbidden"]
        environ["PATH_INFO"] = path[len(self.prefix) :] or "/"
        for name in ("RAW_URI", "REQUEST_URI"):  # werkzeug's raw request line, which moto routes some services by
            if name in environ:
                environ[name] = str(environ[name])[len(self.prefix) :] or "/"
        return self.app(environ, start_response)


class KeepAliveHandler(MotoRequestHandler):
    """HTTP/1.1: boto3 keeps its connections open instead of connecting anew for every request."""

    protocol_version = "HTTP/1.1"


class EmbeddedMoto:
    """moto's server on 127.0.0.1 in a background thread of this process, reachable only through
    `endpoint_url`, whose path carries a random secret (SecretPath)."""

    def __init__(self, port: int = 0, secret: str | None = None) -> None:
        moto_speed.install()
        self.secret = secret or secrets.token_hex(16)
        self.app = SerializedDynamoDB(RememberingDispatcher(create_backend_app))
        self.iam = IamEnforcement(LambdaRelay(self.app))
        self.server: BaseWSGIServer = make_server(
            "127.0.0.1", port, SecretPath(self.iam, self.secret), threaded=True, request_handler=KeepAliveHandler
        )
        self.thread = threading.Thread(target=self.server.serve_forever, name="moto", daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/{self.secret}"

    def start(self) -> EmbeddedMoto:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()


class MotoProcess:
    """The same server in a child process (`python -m duetime.local.moto_server`); it ends with us."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self._endpoint = ""

    @property
    def endpoint_url(self) -> str:
        return self._endpoint

    def start(self, timeout: float = 30.0) -> MotoProcess:
        command = [
            sys.executable,
            "-m",
            "duetime.local.moto_server",
            "--port",
            str(self.port),
            "--parent",
            str(os.getpid()),
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        line = self.process.stdout.readline().strip()  # the child prints its endpoint once it listens
        if not line.startswith("http://") or time.monotonic() > deadline:
            self.stop()
            raise RuntimeError(f"the moto server did not start: {line!r}")
        self._endpoint = line
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def enforce_roles(endpoint_url: str, table: dict[str, dict[str, Any]]) -> None:
    """Give the server at `endpoint_url` the roles whose calls it checks (stack_roles.policy_table)."""
    request = urllib.request.Request(endpoint_url + IAM_ROUTE, data=json.dumps(table).encode(), method="PUT")
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()


def denied_calls(endpoint_url: str) -> list[dict[str, str]]:
    """The calls the server at `endpoint_url` refused so far: role, action, resource."""
    with urllib.request.urlopen(endpoint_url + DENIED_ROUTE, timeout=30) as response:
        return list(json.loads(response.read())["denied"])


def served_calls(endpoint_url: str) -> dict[str, int]:
    """The requests the server at `endpoint_url` has served so far, by operation ("sqs:ReceiveMessage")."""
    with urllib.request.urlopen(endpoint_url + CALLS_ROUTE, timeout=30) as response:
        return {str(k): int(v) for k, v in json.loads(response.read())["calls"].items()}


def _watch_parent(parent: int) -> None:
    """End this server when the process that started it is gone (even if it was killed)."""
    while True:
        time.sleep(1)
        try:
            os.kill(parent, 0)
        except OSError:
            os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description="duetime's embedded moto server, in a process of its own")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent", type=int, default=0)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = EmbeddedMoto(args.port)
    if args.parent:
        threading.Thread(target=_watch_parent, args=(args.parent,), daemon=True).start()
    print(server.endpoint_url, flush=True)
    server.server.serve_forever()


if __name__ == "__main__":
    main()
