"""Telling about failed executions: each owner at the destinations its job names (OwnerNotifier), the
operator at its alarm topic in aggregate (SnsNotifier), and the console locally (ConsoleNotifier)."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from duetime.definitions import METRIC_NOTICES_FAILED, NOTICE_WEBHOOK_TIMEOUT_SECONDS
from duetime.domain.destinations import FailureDestination, Notify, owner_email_topic_name
from duetime.domain.grants import EVERYONE, Grants
from duetime.targets.webhook import WebhookTarget

log = logging.getLogger("duetime.notify")


class ConsoleNotifier:
    """Prints each notice on the console (`duetime local`)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stdout
        self.sent: list[tuple[str, str, dict[str, object]]] = []

    def notify(self, owner: str, subject: str, detail: dict[str, object]) -> None:
        self.sent.append((owner, subject, detail))
        print(f"[duetime] to {owner}: {subject} {json.dumps(detail, default=str)}", file=self.stream, flush=True)


class SnsNotifier:
    """Publishes a notice to a topic (the operator's alarm topic: the DLQ notifier's aggregate), with the
    owner as a message attribute to filter on."""

    def __init__(self, client: Any, topic_arn: str) -> None:
        self.client = client
        self.topic_arn = topic_arn

    def notify(self, owner: str, subject: str, detail: dict[str, object]) -> None:
        self.client.publish(
            TopicArn=self.topic_arn,
            Subject=subject[:99],
            Message=json.dumps(detail, default=str),
            MessageAttributes={"owner": {"DataType": "String", "StringValue": owner or "unknown"}},
        )


# What a notice carries for the notifier only: where the row is, where to deliver, the groups that grant it.
_INTERNAL_FIELDS = ("pk", "sk", "notify", "ownerGroups")


def notice_body(subject: str, detail: dict[str, object]) -> bytes:
    """The JSON an owner's destination receives: the subject and the notice, less the notifier's own fields."""
    told = {k: v for k, v in detail.items() if k not in _INTERNAL_FIELDS}
    return json.dumps({"subject": subject, **told}, separators=(",", ":"), default=str).encode()


def destinations_of(detail: dict[str, object]) -> list[FailureDestination]:
    """The job's `notify.onFailure` a notice carries (none for a notice of a job without it)."""
    raw = detail.get("notify")
    if not isinstance(raw, dict):
        return []
    try:
        return Notify.model_validate(raw).on_failure
    except ValueError:
        log.warning("a notice for job %s carries unreadable destinations", detail.get("jobId"))
        return []


class OwnerNotifier:
    """Tells each notice to its job's owner, where the job's `notify.onFailure` says: a signed webhook
    POST (checked after DNS as webhook handlers are), a publish to the owner's SNS topic, or a mail through
    the owner's own topic (`<prefix>-owner-<hash>`, created on first use, the address subscribed to it).

    Never the operator's topic: the operator hears an aggregate (see `take_counts`). A destination that
    fails is logged and counted (`counts["failed"]`), never retried here: the failure stays in the owner's
    dead letters (GET /dead-letters). `also` is told every notice too (`duetime local`'s console).
    Each destination is checked against `grants` first, for the owner and the job's groups the notice
    carries (`ownerGroups`): one no longer granted is not sent to, and counted `notGranted`.
    """

    def __init__(
        self,
        sns: Any | None,
        webhooks: WebhookTarget | None,
        prefix: str,
        also: Any | None = None,
        count_metric: Callable[[str, int], None] | None = None,
        grants: Grants = EVERYONE,
    ) -> None:
        self.grants = grants
        self.sns = sns
        self.webhooks = webhooks
        self.prefix = prefix
        self.also = also
        self.count_metric = count_metric
        self.sent: list[tuple[str, str, dict[str, object]]] = []
        self.counts: Counter[str] = Counter()
        self._subscribed: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def notify(self, owner: str, subject: str, detail: dict[str, object]) -> None:
        with self._lock:
            self.sent.append((owner, subject, detail))
        if self.also is not None:
            self.also.notify(owner, subject, detail)
        destinations = destinations_of(detail)
        if not destinations:
            self._count("withoutDestination")
            return
        body = notice_body(subject, detail)
        groups = detail.get("ownerGroups")
        member_of = tuple(str(g) for g in groups) if isinstance(groups, list) else ()
        for destination in destinations:
            if not self.grants.allows(owner, member_of, destination.grant_name):
                self._count("notGranted")
                log.warning("notice for job %s not sent to a %s: not granted", detail.get("jobId"), _kind(destination))
                continue
            try:
                self._deliver(owner, destination, subject, body, detail)
                self._count("delivered")
            except Exception as exc:
                self._count("failed")
                if self.count_metric is not None:
                    self.count_metric(METRIC_NOTICES_FAILED, 1)
                log.warning("notice for job %s not delivered to a %s: %s", detail.get("jobId"), _kind(destination), exc)

    def take_counts(self) -> dict[str, int]:
        """What was told since the last call: delivered, failed, notGranted, withoutDestination (then starts
        again)."""
        with self._lock:
            counts, self.counts = dict(self.counts), Counter()
        return counts

    def _count(self, what: str) -> None:
        with self._lock:
            self.counts[what] += 1

    def _deliver(
        self, owner: str, destination: FailureDestination, subject: str, body: bytes, detail: dict[str, object]
    ) -> None:
        if destination.webhook is not None:
            self._post(owner, destination.webhook, body, detail)
        elif destination.sns_topic_arn is not None:
            self._sns().publish(TopicArn=destination.sns_topic_arn, Subject=subject[:99], Message=body.decode())
        elif destination.email is not None:
            topic_arn = self._email_topic(owner, destination.email)
            self._sns().publish(TopicArn=topic_arn, Subject=subject[:99], Message=body.decode())

    def _sns(self) -> Any:
        if self.sns is None:
            raise RuntimeError("no SNS here (duetime local on SQLite delivers webhook destinations only)")
        return self.sns

    def _email_topic(self, owner: str, email: str) -> str:
        """The owner's mail topic, created and `email` subscribed to it once per process (both idempotent
        in SNS; SNS mails the address a confirmation first, and delivers once it is confirmed)."""
        sns = self._sns()
        topic_arn = str(sns.create_topic(Name=owner_email_topic_name(self.prefix, owner))["TopicArn"])
        if (topic_arn, email) not in self._subscribed:
            sns.subscribe(TopicArn=topic_arn, Protocol="email", Endpoint=email)
            self._subscribed.add((topic_arn, email))
        return topic_arn

    def _post(self, owner: str, url: str, body: bytes, detail: dict[str, object]) -> None:
        if self.webhooks is None:
            raise RuntimeError("no webhook target configured")
        given_up = threading.Event()
        timer = threading.Timer(NOTICE_WEBHOOK_TIMEOUT_SECONDS, given_up.set)
        timer.start()
        try:
            key = f"notice:{detail.get('kind')}:{detail.get('executionId') or detail.get('jobId')}"
            attempt = detail.get("attempt")
            reply = self.webhooks.deliver(url, owner, key, attempt if isinstance(attempt, int) else 0, body, given_up)
        finally:
            timer.cancel()
        if not 200 <= reply.status < 300:
            raise ConnectionError(f"the webhook answered {reply.status}")


def _kind(destination: FailureDestination) -> str:
    return "webhook" if destination.webhook else "SNS topic" if destination.sns_topic_arn else "mail address"
