"""Where a job's owner is told that its runs fail for good: the job's `notify.onFailure` destinations.

Each destination is a place duetime sends to on the owner's behalf, so each is granted as a handler is
(domain/grants.py): a webhook by its URL, an SNS topic as `sns:<topic ARN>`, a mail address as
`email:<address>` (the domain in lower case), checked at create, at edit and again at delivery.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from duetime.domain.errors import Forbidden, InvalidInput
from duetime.domain.grants import Grants
from duetime.domain.webhooks import parse_webhook_url

# A job names at most this many places to tell (each failure is one delivery per destination).
MAX_FAILURE_DESTINATIONS = 5
MAX_DESTINATION_CHARS = 2048
# The owner's SNS topic must be named so: the notifier's IAM role may publish to such topics only (in any
# account whose topic policy lets it), never to the operator's own topics (docs/events.md says why).
OWNER_TOPIC_NAME_PREFIX = "duetime-notify-"
SNS_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:([A-Za-z0-9_-]{1,256}(?:\.fifo)?)")
# How a grant names a topic and a mail address (a webhook is named by its URL).
SNS_GRANT_PREFIX = "sns:"
EMAIL_GRANT_PREFIX = "email:"
# Deliberately plain: one @, no spaces, a dot in the domain. SNS sends a confirmation the owner must accept.
EMAIL = re.compile(r"[^@\s]{1,64}@[^@\s]+\.[^@\s]+")
MAX_EMAIL_CHARS = 254


class FailureDestination(BaseModel):
    """One place to tell: exactly one of `webhook` (a signed POST, checked as webhook handlers are),
    `snsTopicArn` (an SNS topic the owner owns, named duetime-notify-...) or `email`."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    webhook: str | None = Field(default=None, min_length=1, max_length=MAX_DESTINATION_CHARS)
    sns_topic_arn: str | None = Field(default=None, min_length=1, max_length=MAX_DESTINATION_CHARS)
    email: str | None = Field(default=None, min_length=3, max_length=MAX_EMAIL_CHARS)

    @field_validator("sns_topic_arn")
    @classmethod
    def _topic(cls, value: str | None) -> str | None:
        match = SNS_TOPIC_ARN.fullmatch(value) if value is not None else None
        if value is not None and match is None:
            raise ValueError("must be an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)")
        if match is not None and not match.group(1).startswith(OWNER_TOPIC_NAME_PREFIX):
            raise ValueError(f"must name a topic whose name starts with {OWNER_TOPIC_NAME_PREFIX!r}")
        return value

    @field_validator("email")
    @classmethod
    def _email(cls, value: str | None) -> str | None:
        if value is not None and not EMAIL.fullmatch(value):
            raise ValueError("must be a mail address like name@example.com")
        return value

    @field_validator("webhook")
    @classmethod
    def _webhook(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError("must be an https:// URL")
        return value

    @property
    def grant_name(self) -> str:
        """The name a grant must cover for the owner to use this destination."""
        if self.webhook is not None:
            return self.webhook
        if self.sns_topic_arn is not None:
            return SNS_GRANT_PREFIX + self.sns_topic_arn
        local, _, domain = (self.email or "").rpartition("@")
        return f"{EMAIL_GRANT_PREFIX}{local}@{domain.lower()}"

    @property
    def field_name(self) -> str:
        """The wire name of the one field given: webhook, snsTopicArn or email."""
        return "webhook" if self.webhook is not None else "snsTopicArn" if self.sns_topic_arn is not None else "email"

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Shown as given: the one destination field, without the two unset ones."""
        return {k: v for k, v in handler(self).items() if v is not None}

    @model_validator(mode="after")
    def _exactly_one(self) -> FailureDestination:
        given = [v for v in (self.webhook, self.sns_topic_arn, self.email) if v is not None]
        if len(given) != 1:
            raise ValueError("each destination is exactly one of webhook, snsTopicArn or email")
        return self


class Notify(BaseModel):
    """A job's `notify`: who hears of its failures (a run that failed for good, an automatic pause)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    on_failure: list[FailureDestination] = Field(default_factory=list, max_length=MAX_FAILURE_DESTINATIONS)

    def in_notice(self) -> dict[str, Any]:
        """As a DLQ notice carries it to the notifier (which reads it back with model_validate)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def owner_email_topic_name(prefix: str, owner: str) -> str:
    """The topic the notifier creates for an owner's email destinations: `<prefix>-owner-<hash>` (a hash:
    owners may hold any character, topic names may not, and the name must not reveal the owner)."""
    return f"{prefix}-owner-{hashlib.sha256(owner.encode('utf-8', 'surrogatepass')).hexdigest()[:24]}"


def check_webhook_destinations(notify: Notify | None, allow_loopback: bool) -> None:
    """Check each webhook destination as a webhook handler is checked (no credentials, no private or
    loopback address unless `allow_loopback`); raises InvalidInput naming `notify.onFailure[i].webhook`."""
    for i, destination in enumerate(notify.on_failure if notify else []):
        if destination.webhook is None:
            continue
        try:
            parse_webhook_url(destination.webhook, allow_loopback)
        except InvalidInput as exc:
            raise InvalidInput(exc.message, field=f"notify.onFailure[{i}].webhook") from exc


def check_destination_grants(notify: Notify | None, grants: Grants, owner: str, groups: Iterable[str]) -> None:
    """Raise Forbidden naming `notify.onFailure[i].<field>` for the first destination the owner (or one of
    its `groups`) is not granted."""
    member_of = tuple(groups)
    for i, destination in enumerate(notify.on_failure if notify else []):
        name = destination.grant_name
        if not grants.allows(owner, member_of, name):
            raise Forbidden(
                f"owner {owner!r} is not granted the failure destination {name!r}",
                field=f"notify.onFailure[{i}].{destination.field_name}",
            )
