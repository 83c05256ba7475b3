"""duetime: a distributed job scheduler on AWS serverless parts; the public handler API is imported from here."""

from duetime.domain.checkpoints import CheckpointRejected
from duetime.domain.errors import StaleAttempt
from duetime.worker.registry import JobContext, PermanentFailure, handler

__all__ = ["CheckpointRejected", "JobContext", "PermanentFailure", "StaleAttempt", "handler"]
