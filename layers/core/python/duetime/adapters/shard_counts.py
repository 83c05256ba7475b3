"""Shard counts of due-hour buckets, as both store adapters keep them: fixed once, then cached for good."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from duetime.definitions import Settings
from duetime.domain.keys import MOST_SHARDS_KEY


class BucketShards:
    """The shard count of each due-hour bucket: read from its control record, or fixed with the configured
    count by the first writer (a conditional write; a loser takes the winner's count).

    A bucket's count never changes once fixed, so what this process has seen is cached for its life and a
    normal run reads each bucket once per process. A bucket not fixed yet is never cached: another process
    may fix it at any moment. Threads may race to fill the cache; they read the same value.
    """

    def __init__(
        self,
        configured: int,
        read: Callable[[list[str]], dict[str, int]],
        fix: Callable[[str, int], int],
    ) -> None:
        self.configured = configured
        self._read = read  # recorded counts of the given buckets (absent: not fixed yet)
        self._fix = fix  # fix a bucket's count unless fixed already; returns the count it has
        self._known: dict[str, int] = {}

    def of(self, bucket: str) -> int:
        """The bucket's count, fixing it now with the configured count if nobody has yet."""
        known = self._known.get(bucket)
        if known is not None:
            return known
        count = self._read([bucket]).get(bucket)
        if count is None:
            count = self._fix(bucket, self.configured)
        self._known[bucket] = count
        return count

    def recorded(self, buckets: list[str]) -> dict[str, int]:
        """The counts of those of `buckets` that are fixed (a bucket not fixed has no rows): reads only."""
        missing = [b for b in dict.fromkeys(buckets) if b not in self._known]
        if missing:
            self._known.update(self._read(missing))
        return {b: self._known[b] for b in buckets if b in self._known}


class ShardCountCalls:
    """The store's calls on shard counts, the same over either adapter's BucketShards and control records (a
    mixin of DynamoControl and SqliteControl)."""

    settings: Settings
    bucket_shards: BucketShards
    # Each adapter's control part reads its records (DynamoControl.get_control, SqliteBase.get_control).
    get_control: Callable[[str], dict[str, Any] | None]

    def shards_of_bucket(self, bucket: str) -> int:
        """The shard count of `bucket` (`YYYYMMDDHH`), fixed now with the configured count if not yet;
        read once per process and bucket (BucketShards)."""
        return self.bucket_shards.of(bucket)

    def recorded_shards(self, buckets: list[str]) -> dict[str, int]:
        """The shard counts of those of `buckets` that are fixed; a bucket not fixed holds no row."""
        return self.bucket_shards.recorded(buckets)

    def most_shards(self) -> int:
        """How many shards the pre-loader and reconciler visit: the configured count, or more if a bucket was
        fixed with more (before a reshard to fewer)."""
        record = self.get_control(MOST_SHARDS_KEY)
        return max(self.settings.shards, int(record["shards"]) if record else 0)
