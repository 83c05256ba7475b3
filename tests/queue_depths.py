"""Messages on each due queue of a job class (visible, delayed or in flight), on either queue adapter."""

from __future__ import annotations

from typing import Any

from duetime.adapters.sqlite.queue import SqliteQueues

SQS_DEPTHS = [
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
]


def class_queue_depths(queues: Any, job_class: str = "default") -> list[int]:
    """Each due queue's depth, by index."""
    if isinstance(queues, SqliteQueues):
        return [queues.depth(job_class, index) for index in range(len(queues.class_queue_names[job_class]))]
    return [
        sum(
            int(v)
            for v in queues.client.get_queue_attributes(QueueUrl=url, AttributeNames=SQS_DEPTHS)["Attributes"].values()
        )
        for url in queues.class_queue_urls[job_class]
    ]
