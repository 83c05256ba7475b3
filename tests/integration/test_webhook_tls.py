"""Webhooks over real TLS on 127.0.0.1: the worker connects to the address it checked and verifies the
certificate against the URL's host name (SNI), so pinning the address never weakens TLS."""

from __future__ import annotations

import ssl
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from duetime.adapters.aws.secrets import FileSecrets
from duetime.targets.webhook import WebhookTarget
from duetime.worker.kinds import Targets, resolve_handler
from duetime.worker.registry import JobContext

from tests.webhook_receiver import receiver

HOST = "hooks.duetime-test.localhost"


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_certificates(folder: Path, host: str) -> tuple[Path, Path, Path]:
    """A test CA, and a server certificate it signed for `host`: (ca.pem, server.pem, server.key)."""
    now = datetime.now(UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("duetime test CA"))
        .issuer_name(_name("duetime test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name(host))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


@pytest.fixture
def tls(tmp_path):
    ca, cert, key = make_certificates(tmp_path, HOST)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(ca))
    return server, client


def context() -> JobContext:
    return JobContext("j_1.1796169600000", "j_1", 1, datetime(2026, 12, 1, 9, tzinfo=UTC), {"n": 1}, owner="alice")


def test_https_to_the_checked_address_with_the_certificate_verified_for_the_host(tls, tmp_path):
    server, client = tls
    secrets = FileSecrets(tmp_path)
    lookups: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    with receiver(secrets.secret_for, tls=server, host=HOST) as hook:
        target = WebhookTarget(secrets, allow_loopback=True, resolve=resolve, tls=client)
        assert resolve_handler(hook.url, Targets(webhook_target=target))(context()) == {"ok": True}
    assert lookups == [HOST]
    [request] = hook.requests
    assert request.verified and request.json["payload"] == {"n": 1}


def test_a_certificate_for_another_host_is_refused_and_the_attempt_retried(tls, tmp_path):
    server, client = tls
    secrets = FileSecrets(tmp_path)
    with receiver(secrets.secret_for, tls=server, host="other.duetime-test.localhost") as hook:
        target = WebhookTarget(secrets, allow_loopback=True, resolve=lambda host, port: ["127.0.0.1"], tls=client)
        with pytest.raises(ssl.SSLCertVerificationError, match=r"other\.duetime-test\.localhost"):
            resolve_handler(hook.url, Targets(webhook_target=target))(context())
    assert hook.requests == []
