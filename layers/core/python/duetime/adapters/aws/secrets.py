"""Per-owner webhook signing secrets: Secrets Manager on AWS (read and cached by workers), files locally."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import ClientError

from duetime.definitions import WEBHOOK_SECRETS_FOLDER, webhook_secret_name

# Owners become file and secret names as they are when made of these (Secrets Manager's name alphabet,
# less "/"); any other owner is named by a digest, so no owner can reach outside its folder.
SAFE_OWNER = re.compile(r"[A-Za-z0-9_+=@-][A-Za-z0-9_+=.@-]{0,127}")
# A rotated secret reaches every worker within this time.
CACHE_SECONDS = 300.0


class MissingWebhookSecret(LookupError):
    """The owner has no webhook secret yet (on AWS it is made by `duetime webhook-secret --owner NAME`)."""


class WebhookSecrets(Protocol):
    """Where a worker finds the secret that signs an owner's webhook requests."""

    def secret_for(self, owner: str) -> str: ...


def owner_key(owner: str) -> str:
    """`owner` as a file or secret name: itself when safe, else "sha256-" and its digest."""
    if SAFE_OWNER.fullmatch(owner):
        return owner
    return "sha256-" + hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


class FileSecrets:
    """`<data_dir>/webhook-secrets/<owner>`, mode 0600, made on first use (by a worker or the CLI)."""

    def __init__(self, data_dir: str | Path) -> None:
        self.folder = Path(data_dir) / WEBHOOK_SECRETS_FOLDER

    def path(self, owner: str) -> Path:
        return self.folder / owner_key(owner)

    def secret_for(self, owner: str) -> str:
        path = self.path(owner)
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            pass
        # The data dir too, if this is its first use (`duetime webhook-secret` before `duetime local`): 0700
        # as `duetime local` makes it, for the database it will hold. One that exists keeps its mode.
        self.folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.folder.mkdir(exist_ok=True, mode=0o700)
        # Written whole under a temporary name, then linked into place: a concurrent first use by another
        # process either wins the link (and both read its secret) or finds the file complete.
        staging = self.folder / f".{path.name}.{os.getpid()}.{threading.get_ident()}"
        descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(new_secret() + "\n")
        try:
            os.link(staging, path)
        except FileExistsError:
            pass
        finally:
            staging.unlink()
        return path.read_text().strip()


class SecretsManagerSecrets:
    """Secrets "<prefix>/webhook-secrets/<owner>", read with GetSecretValue and cached for CACHE_SECONDS."""

    def __init__(
        self,
        client: Any,
        prefix: str,
        cache_seconds: float = CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._client_factory: Callable[[], Any] | None = None
        self.prefix = prefix
        self.cache_seconds = cache_seconds
        self.monotonic = monotonic
        self._cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    @classmethod
    def lazy(cls, client_factory: Callable[[], Any], prefix: str) -> SecretsManagerSecrets:
        """Secrets whose client is made at the first webhook run: a worker without webhooks (or a Lambda
        cold start) never pays for it."""
        secrets = cls(None, prefix)
        secrets._client_factory = client_factory
        return secrets

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None and self._client_factory is not None:
                self._client = self._client_factory()
            return self._client

    def name(self, owner: str) -> str:
        return webhook_secret_name(self.prefix, owner_key(owner))

    def secret_for(self, owner: str) -> str:
        """The owner's secret; raises MissingWebhookSecret when there is none (other errors propagate)."""
        now = self.monotonic()
        with self._lock:
            cached = self._cache.get(owner)
        if cached and now - cached[0] < self.cache_seconds:
            return cached[1]
        try:
            value = str(self.client.get_secret_value(SecretId=self.name(owner))["SecretString"]).strip()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                raise MissingWebhookSecret(
                    f"no webhook secret for owner {owner!r}: create it with `duetime webhook-secret --owner {owner}`"
                ) from exc
            raise
        with self._lock:
            self._cache[owner] = (now, value)
        return value

    def ensure(self, owner: str) -> str:
        """The owner's secret, created first if there is none (what `duetime webhook-secret` runs on AWS)."""
        try:
            return self.secret_for(owner)
        except MissingWebhookSecret:
            pass
        try:
            self.client.create_secret(
                Name=self.name(owner),
                SecretString=new_secret(),
                Description=f"duetime: signs the webhook requests of owner {owner!r}",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceExistsException":
                raise
        return self.secret_for(owner)
