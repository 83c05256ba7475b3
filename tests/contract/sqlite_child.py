"""A receiver in a process of its own, for the multi-process SQLite tests: prints each message it receives.

Usage: python sqlite_child.py DB_PATH VISIBILITY WAIT IDLE_EXIT [HOLD]
Prints `ready`, then one JSON line per received message ({"id", "count", "at"}: wall ms), flushed at once;
exits after IDLE_EXIT seconds without a message, or, with HOLD, sleeps forever after the first message.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "layers" / "core" / "python"))

from duetime.adapters.sqlite.db import Database
from duetime.adapters.sqlite.queue import SqliteQueues
from duetime.definitions import Settings


def main() -> None:
    path, visibility, wait, idle_exit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    hold = len(sys.argv) > 5
    queues = SqliteQueues(Database(path), Settings(shards=4))
    print("ready", flush=True)
    last = time.monotonic()
    while time.monotonic() - last < idle_exit:
        for received in queues.receive("default", 10, wait, visibility):
            line = {"id": received.message.execution_id, "count": received.receive_count, "at": time.time_ns() // 10**6}
            print(json.dumps(line), flush=True)
            last = time.monotonic()
            if hold:
                time.sleep(3600)


if __name__ == "__main__":
    main()
