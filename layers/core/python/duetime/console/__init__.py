"""The web console: static files (HTML, CSS, JS) that use only the public API, and how to serve them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STATIC_DIR = Path(__file__).parent / "static"
# Where `duetime local` serves the console; the page's own links are relative to it.
CONSOLE_PATH = "/console"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}
# Scripts and styles only from this origin (no inline script, no CDN); the API is called on the same origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass(frozen=True)
class StaticResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def console_file(path: str, root: Path = STATIC_DIR) -> StaticResponse | None:
    """The response for GET `path` (no query) when it is under /console, else None (an API route).

    /console redirects to /console/ so the page's relative links resolve; /console/ is index.html; a name
    outside the static folder, a hidden file or an unknown type is 404.
    """
    if path != CONSOLE_PATH and not path.startswith(CONSOLE_PATH + "/"):
        return None
    if path == CONSOLE_PATH:
        return StaticResponse(301, {"Location": CONSOLE_PATH + "/", **SECURITY_HEADERS}, b"")
    name = path[len(CONSOLE_PATH) + 1 :] or "index.html"
    target = (root / name).resolve()
    known = CONTENT_TYPES.get(target.suffix)
    inside = target.is_relative_to(root.resolve()) and not any(p.startswith(".") for p in Path(name).parts)
    if not inside or known is None or not target.is_file():
        body = b"not found\n"
        return StaticResponse(404, {"Content-Type": "text/plain; charset=utf-8", **SECURITY_HEADERS}, body)
    return StaticResponse(200, {"Content-Type": known, **SECURITY_HEADERS}, target.read_bytes())


def sign_in_link(api_url: str, token: str) -> str:
    """The console's URL with the token in the fragment: a browser never sends the fragment to a server."""
    return f"{api_url}{CONSOLE_PATH}/#token={token}"
