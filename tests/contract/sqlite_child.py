"""A receiver in a process of its own, for the multi-process SQLite tests: prints each message it receives.

Usage: python sqlite_child.py DB_PATH VISIBILITY WAIT IDLE_EXIT [hold|delete]
Prints `ready`, then one JSON line per received message ({"id", "count", "at"}: wall ms), flushed at once;
exits after IDLE_EXIT seconds without a message. `hold`: sleeps forever after the first message;
`delete`: deletes each message after printing it (a worker that handled it).
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
    mode = sys.argv[5] if len(sys.argv) > 5 else ""
    queues = SqliteQueues(Database(path), Settings(shards=4))
    print("ready", flush=True)
    last = time.monotonic()
    while time.monotonic() - last < idle_exit:
        for received in queues.receive("default", 10, wait, visibility):
            line = {"id": received.message.execution_id, "count": received.receive_count, "at": time.time_ns() // 10**6}
            print(json.dumps(line), flush=True)
            last = time.monotonic()
            if mode == "hold":
                time.sleep(3600)
            if mode == "delete":
                queues.delete("default", received.receipt)


if __name__ == "__main__":
    main()
