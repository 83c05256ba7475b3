"""Billing jobs run by duetime's workers: `handlerModules=billing.handlers` imports this module."""

from __future__ import annotations

from typing import Any

from duetime.worker.registry import JobContext, PermanentFailure, handler


@handler("billing.generate_invoices")
def generate_invoices(ctx: JobContext) -> dict[str, Any]:
    """Invoice one region's customers for the period the run was scheduled for.

    The execution id is the idempotency key: the same on every attempt of this run, so a retry after a
    crash finds the invoices the first attempt made instead of making them twice.
    """
    region = ctx.payload.get("region")
    if not isinstance(region, str) or not region:
        raise PermanentFailure("payload.region is required")  # no retry can fix the input
    period = ctx.scheduled_at.strftime("%Y-%m")
    return {"region": region, "period": period, "batch": ctx.execution_id}
