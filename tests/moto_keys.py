"""In-process moto makes an RSA key for every KMS key it creates, and it creates one (DynamoDB's default key) for
each table created with encryption: create_tables made three, ~55 ms of CPU a test, about a minute of CPU over the
tiers' moto tests. Keys of the same spec share one key's material here; no test tells KMS keys apart by it."""

from __future__ import annotations

from typing import Any


def reuse_kms_key_material() -> None:
    """Patch moto's KMS key generation (once a process) to make one private key a key spec and hand it out again."""
    from moto.kms import models as kms_models

    if getattr(kms_models, "_duetime_reused_keys", False):
        return
    made: dict[str, Any] = {}
    generate = kms_models.generate_private_key

    def reused(key_spec: str) -> Any:
        if key_spec not in made:
            made[key_spec] = generate(key_spec)
        return made[key_spec]

    kms_models.generate_private_key = reused
    kms_models._duetime_reused_keys = True  # type: ignore[attr-defined]
