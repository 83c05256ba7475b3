"""Queues: per job class of duetime.definitions its due queues and DLQ, encrypted, TLS-only, with redrive."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from constructs import Construct
from duetime.definitions import (
    DLQ_RETENTION_SECONDS,
    DUE_QUEUE_RETENTION_SECONDS,
    MAX_RECEIVE_COUNT,
    JobClassDef,
    Settings,
    lambda_worker_timeout_seconds,
    queue_visibility_seconds,
)

from infra.common import suppress

DLQ_RETENTION = Duration.seconds(DLQ_RETENTION_SECONDS)  # SQS's maximum: time for the notifier and people to look


@dataclass(frozen=True)
class ClassQueues:
    """A class's due queue 0 (`due`), its further due queues by index 1.. (`more_due`), and its one DLQ."""

    job_class: JobClassDef
    due: sqs.Queue
    dlq: sqs.Queue
    more_due: tuple[sqs.Queue, ...] = ()

    @property
    def every_due(self) -> list[sqs.Queue]:
        """Every due queue of the class, by index."""
        return [self.due, *self.more_due]


def lambda_worker_timeout(job_class: JobClassDef) -> Duration:
    """The worker function's timeout: the class's longest job plus a minute to report, within Lambda's 15."""
    return Duration.seconds(lambda_worker_timeout_seconds(job_class))


class Queues(Construct):
    """Due queues and DLQs, keyed by job class name."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, key: kms.IKey | None = None) -> None:
        super().__init__(scope, construct_id)
        # SSE-SQS by default; the stack's data key (context kmsKey) when there is one.
        encryption = sqs.QueueEncryption.KMS if key else sqs.QueueEncryption.SQS_MANAGED
        self.by_class: dict[str, ClassQueues] = {}
        for name, job_class in settings.job_classes.items():
            dlq = sqs.Queue(
                self,
                f"Dlq-{name}",
                queue_name=job_class.dlq_name(settings.prefix),
                encryption=encryption,
                encryption_master_key=key,
                enforce_ssl=True,
                retention_period=DLQ_RETENTION,
            )
            suppress(dlq, {"AwsSolutions-SQS3": "This queue is itself the dead-letter queue of its job class."})
            # Queue 0 keeps the construct id and name of a one-queue class, so spreading a class adds
            # queues and never replaces the one an existing stack has.
            due = [
                sqs.Queue(
                    self,
                    f"Due-{name}" if index == 0 else f"Due-{name}-{index}",
                    queue_name=job_class.queue_name(settings.prefix, index),
                    encryption=encryption,
                    encryption_master_key=key,
                    enforce_ssl=True,
                    visibility_timeout=Duration.seconds(queue_visibility_seconds(job_class)),
                    retention_period=Duration.seconds(DUE_QUEUE_RETENTION_SECONDS),
                    dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=MAX_RECEIVE_COUNT),
                )
                for index in range(job_class.queues)
            ]
            self.by_class[name] = ClassQueues(job_class=job_class, due=due[0], dlq=dlq, more_due=tuple(due[1:]))

    def queue_urls(self) -> dict[str, str | list[str]]:
        """RuntimeConfig.queue_urls: a class's queue URL, or a spread class's URLs by index."""
        return {
            name: [d.queue_url for d in q.every_due] if q.more_due else q.due.queue_url
            for name, q in self.by_class.items()
        }

    def dlq_urls(self) -> dict[str, str]:
        return {name: q.dlq.queue_url for name, q in self.by_class.items()}
