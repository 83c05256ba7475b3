"""Where duetime's events go: EventBridge on AWS (PutEvents, ten entries a request), the console and an
optional signed webhook under `duetime local`. A refused event is logged and counted, never raised."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from duetime.definitions import (
    LOCAL_EVENTS_SIGNER,
    METRIC_EVENTS_FAILED,
    NOTICE_WEBHOOK_TIMEOUT_SECONDS,
    PUT_EVENTS_MAX_ENTRIES,
)
from duetime.domain.events import EVENT_SOURCE, Event
from duetime.targets.webhook import WebhookTarget

log = logging.getLogger("duetime.events")

CountMetric = Callable[[str, int], None]


def chunks(events: Sequence[Event], size: int = PUT_EVENTS_MAX_ENTRIES) -> list[Sequence[Event]]:
    """`events` in runs of at most `size`, in order: n events make ceil(n / size) requests."""
    return [events[i : i + size] for i in range(0, len(events), size)]


def event_id(event: Event) -> str:
    """A stable id of the event (what it is about and when), for receivers to drop a repeat."""
    detail = event.detail
    subject = detail.get("executionId") or f"{detail.get('jobId')}#{detail.get('jobVersion')}"
    return f"{event.detail_type.replace(' ', '-').lower()}:{subject}:{event.envelope()['time']}"


class EventBridgeEvents:
    """Publishes events to an EventBridge bus, PUT_EVENTS_MAX_ENTRIES to a request. Entries the answer
    reports as failed (and a request that fails whole) are logged and counted in `failed` and the
    EventsFailed metric: an event never fails the run or the change it tells of."""

    def __init__(self, client: Any, bus_name: str, count_metric: CountMetric | None = None) -> None:
        self.client = client
        self.bus_name = bus_name
        self.count_metric = count_metric
        self.failed = 0
        self._lock = threading.Lock()

    def entry(self, event: Event) -> dict[str, Any]:
        return {
            "Source": EVENT_SOURCE,
            "DetailType": event.detail_type,
            "Detail": json.dumps(event.detail, separators=(",", ":"), default=str),
            "Time": event.time,
            "EventBusName": self.bus_name,
        }

    def publish(self, events: Sequence[Event]) -> None:
        for chunk in chunks(events):
            try:
                answer = self.client.put_events(Entries=[self.entry(e) for e in chunk])
            except Exception:
                log.exception("PutEvents failed: %d events not published", len(chunk))
                self._count_failed(len(chunk))
                continue
            if not answer.get("FailedEntryCount"):
                continue
            refused = 0
            for event, result in zip(chunk, answer.get("Entries", []), strict=False):
                if result.get("ErrorCode"):
                    refused += 1
                    log.warning(
                        "event refused: %s %s: %s %s",
                        event.detail_type,
                        event_id(event),
                        result.get("ErrorCode"),
                        result.get("ErrorMessage"),
                    )
            self._count_failed(refused or int(answer["FailedEntryCount"]))

    def _count_failed(self, n: int) -> None:
        with self._lock:
            self.failed += n
        if self.count_metric is not None:
            self.count_metric(METRIC_EVENTS_FAILED, n)


class ConsoleEvents:
    """`duetime local`'s events: each printed on the console, and POSTed to `webhook_url` when given,
    signed as webhook handlers' requests are (with LOCAL_EVENTS_SIGNER's secret)."""

    def __init__(
        self,
        stream: Any = None,
        webhook_url: str | None = None,
        webhooks: WebhookTarget | None = None,
        echo: bool = True,
    ) -> None:
        self.stream = stream or sys.stdout
        self.webhook_url = webhook_url
        self.webhooks = webhooks
        self.echo = echo
        self.published: list[Event] = []
        self.failed = 0
        self._lock = threading.Lock()

    def publish(self, events: Sequence[Event]) -> None:
        with self._lock:
            self.published.extend(events)
        for event in events:
            if self.echo:
                detail = json.dumps(event.detail, default=str)
                print(f"[duetime] event {event.detail_type}: {detail}", file=self.stream, flush=True)
            if self.webhook_url and self.webhooks is not None:
                self._post(event)

    def _post(self, event: Event) -> None:
        assert self.webhook_url is not None and self.webhooks is not None
        body = json.dumps(event.envelope(), separators=(",", ":"), default=str).encode()
        given_up = threading.Event()
        timer = threading.Timer(NOTICE_WEBHOOK_TIMEOUT_SECONDS, given_up.set)
        timer.start()
        try:
            reply = self.webhooks.deliver(self.webhook_url, LOCAL_EVENTS_SIGNER, event_id(event), 1, body, given_up)
            if not 200 <= reply.status < 300:
                raise ConnectionError(f"the events webhook answered {reply.status}")
        except Exception as exc:  # told, never fatal: the run or the change it tells of stands
            with self._lock:
                self.failed += 1
            log.warning("events webhook %s did not take %s: %s", self.webhook_url, event.detail_type, exc)
        finally:
            timer.cancel()


def emf_count(name: str, value: int) -> None:
    """One CloudWatch metric (EMF on stdout, as the worker's metrics are) in duetime's namespace."""
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    from duetime.definitions import METRIC_NAMESPACE

    with single_metric(name=name, unit=MetricUnit.Count, value=value, namespace=METRIC_NAMESPACE):
        pass


def emf_owner_count(name: str, owner: str) -> None:
    """One of an owner's runs counted under `name` (METRIC_RUNS_ON_TIME, METRIC_RUNS_LATE) with the `Owner`
    dimension alone: `owner` is the bounded value (service/lateness.py owner_dimension), never a raw owner."""
    from aws_lambda_powertools.metrics import MetricUnit, single_metric

    from duetime.definitions import METRIC_NAMESPACE, METRIC_OWNER_DIMENSION

    with single_metric(name=name, unit=MetricUnit.Count, value=1, namespace=METRIC_NAMESPACE) as metric:
        # One series an owner whichever function counts it: not split by POWERTOOLS_SERVICE_NAME's `service`.
        metric.service = ""
        metric.add_dimension(METRIC_OWNER_DIMENSION, owner)
