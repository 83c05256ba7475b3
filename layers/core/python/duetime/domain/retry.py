"""The retry policy as pure functions: full-jitter exponential backoff and whether to try again."""

from __future__ import annotations

from collections.abc import Callable

from duetime.domain.models import RetryPolicy


def backoff_cap_seconds(policy: RetryPolicy, attempt: int) -> float:
    """The upper bound of the wait after failed attempt `attempt` (1-based): min(cap, base * 2^attempt)."""
    return float(min(policy.max_delay_seconds, policy.base_delay_seconds * (2 ** min(attempt, 62))))


def compute_backoff(policy: RetryPolicy, attempt: int, uniform: Callable[[float, float], float]) -> float:
    """Seconds to wait before the next attempt: full jitter, uniform(0, min(cap, base * 2^attempt)).

    `uniform` is injected (random.uniform in production) so tests are deterministic.
    """
    return uniform(0.0, backoff_cap_seconds(policy, attempt))


def should_retry(policy: RetryPolicy, attempt: int, retryable: bool, retry_base: int = 0) -> bool:
    """True if a failure of attempt `attempt` gets another attempt under `policy`: the budget counts the
    attempts since `retry_base` (0, or the attempt a manual retry of a failed execution restarted from)."""
    return retryable and attempt - retry_base < policy.max_attempts
