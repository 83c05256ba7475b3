"""Webhook rules without I/O: which URLs and addresses are refused, what a status means, the signature
that the verify snippet of docs/handlers.md accepts."""

from __future__ import annotations

import ipaddress
import time

import pytest
from duetime.domain.errors import InvalidInput
from duetime.domain.webhooks import (
    Reply,
    classify_status,
    forbidden_reason,
    parse_webhook_url,
    sign,
    sign_v2,
    signed_url,
    verify_request,
)

from tests.webhook_receiver import readme_verify


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local (instance metadata)"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private (carrier-grade NAT)"),
        ("fd00::1", "private (unique local)"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.1", "reserved"),  # documentation range: not globally routable
        ("::ffff:169.254.169.254", "link-local (instance metadata) (embedded in ::ffff:a9fe:a9fe)"),
        ("64:ff9b::7f00:1", "loopback (embedded in 64:ff9b::7f00:1)"),  # NAT64 of 127.0.0.1
        ("2002:a00:1::", "private (embedded in 2002:a00:1::)"),  # 6to4 of 10.0.0.1
        ("::7f00:1", "loopback (embedded in ::7f00:1)"),  # IPv4-compatible 127.0.0.1 (Python: is_global)
        ("::a9fe:a9fe", "link-local (instance metadata) (embedded in ::a9fe:a9fe)"),
        ("::ffff:0:7f00:1", "loopback (embedded in ::ffff:0:7f00:1)"),  # IPv4-translated 127.0.0.1
        ("::ffff:0:a00:1", "private (embedded in ::ffff:0:a00:1)"),
    ],
)
def test_addresses_a_webhook_may_not_reach(address, reason):
    assert forbidden_reason(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_are_allowed(address):
    assert forbidden_reason(ipaddress.ip_address(address)) is None


def test_loopback_is_allowed_only_when_asked_and_nothing_else_with_it():
    assert forbidden_reason(ipaddress.ip_address("127.0.0.1"), allow_loopback=True) is None
    assert forbidden_reason(ipaddress.ip_address("::1"), allow_loopback=True) is None
    assert forbidden_reason(ipaddress.ip_address("169.254.169.254"), allow_loopback=True) is not None
    assert forbidden_reason(ipaddress.ip_address("10.0.0.1"), allow_loopback=True) == "private"


@pytest.mark.parametrize(
    "url",
    [
        "https://",
        "https:///path",
        "ftp://hooks.example.com/x",
        "http://hooks.example.com/x",  # plain http is for loopback, locally
        "https://user:pass@hooks.example.com/x",
        "https://hooks.example.com/x#frag",
        "https://hooks.example.com:99999/x",
        "https://hooks.example.com/a b",
        "https://[::1/x",
        "https://169.254.169.254/latest/meta-data/",
        "https://[fd00::1]/x",
        "https://10.0.0.1/x",
        "https://127.0.0.1:8443/x",
        "https://localhost/x",
        "https://metadata/x",  # a bare name resolves inside the network only
        "https://hooks.example.com/résumé",  # http.client sends ASCII request lines only
        "https://[::7f00:1]/x",
        "https://[::ffff:0:7f00:1]/x",
        "https://[::a9fe:a9fe]/latest/meta-data/",
        "https://127.1/x",  # numeric forms a resolver reads as 127.0.0.1
        "https://2130706433/x",
        "https://0x7f.1/x",
        "https://0x7f000001/x",
        "https://0177.0.0.1/x",
        "https://10.1/x",
        "https://169.254.43518/x",
    ],
)
def test_urls_refused_at_submit_name_the_handler_field(url):
    with pytest.raises(InvalidInput) as caught:
        parse_webhook_url(url)
    assert caught.value.field == "handler"


def test_accepted_urls_keep_host_port_and_path_with_query():
    target = parse_webhook_url("https://Hooks.Example.com/duetime/run?team=billing")
    assert (target.scheme, target.host, target.port, target.path) == (
        "https",
        "hooks.example.com",
        443,
        "/duetime/run?team=billing",
    )
    assert parse_webhook_url("https://93.184.215.14:8443").path == "/"


def test_locally_plain_http_reaches_loopback_only():
    assert parse_webhook_url("http://127.0.0.1:9000/hook", allow_loopback=True).port == 9000
    assert parse_webhook_url("http://localhost:9000/hook", allow_loopback=True).host == "localhost"
    assert parse_webhook_url("https://localhost/hook", allow_loopback=True).scheme == "https"
    for url in ("http://hooks.example.com/x", "http://10.0.0.1/x", "https://169.254.169.254/"):
        with pytest.raises(InvalidInput):
            parse_webhook_url(url, allow_loopback=True)


@pytest.mark.parametrize(
    ("status", "reply"),
    [
        (200, Reply.SUCCEEDED),
        (204, Reply.SUCCEEDED),
        (301, Reply.PERMANENT),
        (400, Reply.PERMANENT),
        (401, Reply.PERMANENT),
        (404, Reply.PERMANENT),
        (408, Reply.RETRY),
        (429, Reply.RETRY),
        (500, Reply.RETRY),
        (503, Reply.RETRY),
    ],
)
def test_what_a_status_means(status, reply):
    assert classify_status(status) == reply


URL = "https://hooks.example.com/duetime/a?x=1"


def signed_headers(secret: str, timestamp: int, body: bytes, url: str = URL) -> dict[str, str]:
    return {
        "Duetime-Timestamp": str(timestamp),
        "Duetime-Signature": sign(secret, timestamp, body),
        "Duetime-Signature-V2": sign_v2(secret, timestamp, "POST", url, body),
    }


@pytest.mark.parametrize("verify", [readme_verify(), verify_request], ids=["readme", "library"])
def test_the_readme_snippet_and_the_library_accept_the_signature_and_refuse_tampering_and_replays(verify):
    body, now = b'{"executionId":"j_1.1"}', int(time.time())
    headers = signed_headers("s3cret", now, body)
    assert verify("s3cret", headers, body, URL)
    assert not verify("other", headers, body, URL)
    assert not verify("s3cret", headers, body + b" ", URL)
    old = now - 3600
    assert not verify("s3cret", signed_headers("s3cret", old, body), body, URL)
    assert not verify("s3cret", {}, body, URL)
    # The same request replayed to another endpoint of the same owner (same secret) is refused
    assert not verify("s3cret", headers, body, "https://hooks.example.com/duetime/b?x=1")
    assert not verify("s3cret", headers, body, "https://hooks.example.com/duetime/a")
    # A v1 signature alone (what could be lifted from another endpoint's request) is not enough
    assert not verify("s3cret", {k: v for k, v in headers.items() if k != "Duetime-Signature-V2"}, body, URL)


@pytest.mark.parametrize(
    "changed",
    [
        {"Duetime-Signature-V2": "v2=é"},  # non-ASCII: compare_digest raised TypeError
        {"Duetime-Signature-V2": "v2=\u0661"},
        {"Duetime-Timestamp": "\u00b2"},  # a digit to str.isdigit, not to int(): ValueError
        {"Duetime-Timestamp": "\u0661\u0662"},  # Arabic-Indic digits
        {"Duetime-Timestamp": "9" * 5000},  # past int()'s digit limit: ValueError
        {"Duetime-Timestamp": "-1"},
        {"Duetime-Timestamp": " 1"},
    ],
)
@pytest.mark.parametrize("verify", [readme_verify(), verify_request], ids=["readme", "library"])
def test_a_malformed_header_is_false_never_an_exception(verify, changed):
    body, now = b"{}", int(time.time())
    assert not verify("s3cret", {**signed_headers("s3cret", now, body), **changed}, body, URL)


def test_the_signed_url_is_lower_case_without_the_default_port_and_verifies_as_such():
    assert signed_url(parse_webhook_url("HTTPS://Hooks.Example.COM:443")) == "https://hooks.example.com/"
    assert signed_url(parse_webhook_url("https://h.example.com:8443/a/B?C=d")) == "https://h.example.com:8443/a/B?C=d"
    now = int(time.time())
    headers = signed_headers("k", now, b"x", "https://hooks.example.com/")
    assert verify_request("k", headers, b"x", "HTTPS://Hooks.Example.com:443", now=now)
    assert verify_request("k", {k.lower(): v for k, v in headers.items()}, b"x", "https://hooks.example.com/")
