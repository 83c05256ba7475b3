"""duetime: a distributed job scheduler on AWS serverless parts; the public handler API is imported from here."""

from duetime.worker.registry import JobContext, PermanentFailure, handler

__all__ = ["JobContext", "PermanentFailure", "handler"]
