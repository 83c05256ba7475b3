"""Who is calling: the owner from a verified bearer token, or a worker."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt

from duetime.domain.errors import InvalidInput, Unauthorized

ISSUER = "duetime-local"
WORKER_ROLE = "worker"
MAX_OWNER_CHARS = 256
# Idempotency keys and other records join the owner and a caller's value with "#": an owner name holding it
# could forge another owner's key ("a#b" + "c" against "a" + "b#c"), so no owner may carry one.
OWNER_SEPARATOR = "#"


# A local token lasts a day unless `duetime token --ttl` asks otherwise; a leaked one is useful for that
# long at most, and never after the data dir is reset (a new signing key).
DEFAULT_TOKEN_TTL = timedelta(hours=24)
MAX_TOKEN_TTL = timedelta(days=30)

# The claim that carries a user's groups: Cognito's on AWS, and the same name in local tokens.
GROUPS_CLAIM = "cognito:groups"
MAX_GROUPS = 100


@dataclass(frozen=True)
class Caller:
    owner: str
    is_worker: bool = False
    groups: tuple[str, ...] = ()  # the owner's groups (Cognito groups on AWS), which grants may name


def check_owner_name(owner: str) -> str:
    """`owner` if an owner may have that name; raises InvalidInput naming `owner` otherwise."""
    if not 1 <= len(owner) <= MAX_OWNER_CHARS or OWNER_SEPARATOR in owner:
        raise InvalidInput(
            f"an owner name is 1..{MAX_OWNER_CHARS} characters without {OWNER_SEPARATOR!r}", field="owner"
        )
    return owner


def issue_token(
    secret: str,
    owner: str,
    worker: bool = False,
    ttl: timedelta = DEFAULT_TOKEN_TTL,
    groups: Sequence[str] = (),
    audience: str | None = None,
) -> str:
    """A signed JWT the local API accepts (`duetime token`) for `ttl`, carrying the owner's `groups` if any
    and, as its audience, the instance id of the data dir it was issued for (an API started with that
    audience refuses tokens of other data dirs). Raises InvalidInput naming `owner` for a name no owner may
    have, naming `ttl` for a lifetime outside 1 s..MAX_TOKEN_TTL."""
    check_owner_name(owner)
    if not timedelta(seconds=1) <= ttl <= MAX_TOKEN_TTL:
        raise InvalidInput(f"a token lives from 1 second to {MAX_TOKEN_TTL.days} days", field="ttl")
    now = datetime.now(UTC)
    claims: dict[str, Any] = {"sub": owner, "iss": ISSUER, "iat": now, "exp": now + ttl}
    if audience:
        claims["aud"] = audience
    if worker:
        claims["role"] = WORKER_ROLE
    if groups:
        claims[GROUPS_CLAIM] = list(groups)
    return jwt.encode(claims, secret, algorithm="HS256")


def caller_from_event(event: dict[str, Any], local_secret: str | None, local_audience: str | None = None) -> Caller:
    """The caller of an API Gateway event; raises Unauthorized.

    On AWS the gateway has verified the token already (JWT authorizer for owners, IAM for workers) and
    the claims or IAM identity arrive in the request context. Locally the same JWT is verified here, with
    `local_audience` (the data dir's instance id) required as its audience when given.
    """
    context = event.get("requestContext") or {}
    authorizer = context.get("authorizer") or {}
    claims = authorizer.get("claims") or (authorizer.get("jwt") or {}).get("claims")
    if claims and claims.get("sub"):
        # A user pool or OIDC issuer speaks for job owners only: workers are IAM principals on AWS, so a
        # "role" claim, which some issuers let users shape, grants nothing here.
        return Caller(owner=_owner(claims["sub"]), groups=_groups(claims.get(GROUPS_CLAIM)))
    identity = context.get("identity") or {}
    if identity.get("userArn") and local_secret is None:
        return Caller(owner=str(identity["userArn"]), is_worker=True)
    if local_secret is None:
        raise Unauthorized("missing credentials")
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    value = str(headers.get("authorization") or "")
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("Authorization: Bearer <token> is required")
    return _verified_caller(token.strip(), local_secret, local_audience)


def _verified_caller(token: str, secret: str, audience: str | None) -> Caller:
    """The caller a local token names, verified once per token: a client sends the same token on every
    request, and checking its signature is a fifth of a request's work (docs/performance.md). A cached
    token is still refused the moment it expires; a new secret or audience (a reset) misses the cache."""
    key = (token, secret, audience)
    cached = _VERIFIED.get(key)
    if cached is not None and time.time() < cached[1]:
        return cached[0]
    try:
        verified = jwt.decode(
            token,
            secret,
            algorithms=["HS256"],
            issuer=ISSUER,
            audience=audience,
            options={"require": ["sub", "exp", *(["aud"] if audience else [])]},
        )
    except (jwt.PyJWTError, ValueError, TypeError) as exc:  # ValueError: also a token that is not text
        raise Unauthorized(f"invalid token: {exc}") from exc
    is_worker = verified.get("role") == WORKER_ROLE
    caller = Caller(owner=_owner(verified["sub"]), is_worker=is_worker, groups=_groups(verified.get(GROUPS_CLAIM)))
    if len(_VERIFIED) >= VERIFIED_TOKENS_KEPT:
        _VERIFIED.clear()  # a few live tokens are the normal case; many distinct ones only refill it
    _VERIFIED[key] = (caller, float(verified["exp"]))
    return caller


# Verified local tokens: (token, secret, audience) -> (caller, expiry in epoch seconds).
VERIFIED_TOKENS_KEPT = 1024
_VERIFIED: dict[tuple[str, str, str | None], tuple[Caller, float]] = {}


def _groups(claim: Any) -> tuple[str, ...]:
    """The groups of a token's claim: a JSON list (local tokens, HTTP API), or the text API Gateway's
    REST authorizer passes on ("a,b", or "[a b]"). Raises Unauthorized for anything else."""
    if claim is None or claim == "":
        return ()
    if isinstance(claim, str):
        text = claim.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        names = [n for n in re.split(r"[,\s]+", text) if n]
    elif isinstance(claim, list) and all(isinstance(n, str) for n in claim):
        names = [n for n in claim if n]
    else:
        raise Unauthorized(f"the token's {GROUPS_CLAIM} claim must be a list of names")
    if len(names) > MAX_GROUPS:
        raise Unauthorized(f"the token names more than {MAX_GROUPS} groups")
    return tuple(dict.fromkeys(names))


def _owner(subject: Any) -> str:
    """The owner named by a token's subject; raises Unauthorized for one no owner could have."""
    owner = str(subject)
    if not 1 <= len(owner) <= MAX_OWNER_CHARS:
        raise Unauthorized(f"the token's subject must be 1..{MAX_OWNER_CHARS} characters")
    if OWNER_SEPARATOR in owner:
        raise Unauthorized(f"the token's subject must not contain {OWNER_SEPARATOR!r}")
    return owner
