"""Telling owners about failed executions: SNS on AWS, the console locally."""

from __future__ import annotations

import json
import sys
from typing import Any


class ConsoleNotifier:
    """Prints each notice on the console (`duetime local`)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stdout
        self.sent: list[tuple[str, str, dict[str, object]]] = []

    def notify(self, owner: str, subject: str, detail: dict[str, object]) -> None:
        self.sent.append((owner, subject, detail))
        print(f"[duetime] to {owner}: {subject} {json.dumps(detail, default=str)}", file=self.stream, flush=True)


class SnsNotifier:
    """Publishes each notice to the alarm topic, with the owner as a message attribute to filter on."""

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
