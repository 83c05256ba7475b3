"""Owners' failure notices on the local machine: the alert topic on moto, relayed to a local notifier.

On AWS the DLQ notifier tells each owner at its job's destinations and the alert topic only an aggregate.
Under `duetime local --backend moto` the real handler also publishes each notice to the alert topic on moto
(config.build_owner_notifier: the template's topic, created with the local stack); a queue subscribed to it is
read back here and each notice handed to a local
notifier (the console, or a test's recorder), so the local machine shows every owner's notices.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from duetime.service.context import Notifier

log = logging.getLogger("duetime.local.notices")


def subscribe_alert_queue(sns: Any, sqs: Any, topic_arn: str, prefix: str) -> str:
    """The local queue subscribed to the alert topic (the local stack's, created from the template); its URL."""
    queue_url = str(sqs.create_queue(QueueName=f"{prefix}-alerts-local")["QueueUrl"])
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn)
    return queue_url


def notice_from_envelope(body: str) -> tuple[str, str, dict[str, object]]:
    """(owner, subject, detail) from the SNS envelope SnsNotifier's publish arrives in."""
    envelope = json.loads(body)
    owner = envelope.get("MessageAttributes", {}).get("owner", {}).get("Value", "unknown")
    detail = json.loads(envelope["Message"])
    if not isinstance(detail, dict):
        return str(owner), str(envelope.get("Subject", "")), {"message": detail}
    # The DLQ notifier function delivered it to the job's destinations already: relayed, it is only shown.
    detail.pop("notify", None)
    return str(owner), str(envelope.get("Subject", "")), detail


class AlertRelay:
    """Reads the alert queue in a daemon thread and hands each notice to `notifier`."""

    def __init__(self, sqs: Any, queue_url: str, notifier: Notifier) -> None:
        self.sqs, self.queue_url, self.notifier = sqs, queue_url, notifier
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="alert-relay", daemon=True)

    def start(self) -> AlertRelay:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)

    def _loop(self) -> None:
        while not self.stopped.is_set():
            try:
                response = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
                for message in response.get("Messages", []):
                    self.notifier.notify(*notice_from_envelope(message["Body"]))
                    self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
            except Exception:
                log.exception("relaying alerts failed")
                self.stopped.wait(1)
