"""A process that takes an SQLite file's write lock and freezes itself (SIGSTOP) holding it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE messages SET receive_count = receive_count WHERE 0")
print("holding", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)  # frozen mid-write: the write lock stays held until SIGCONT
conn.execute("COMMIT")
"""


def frozen_writer(database: str | Path) -> subprocess.Popen[str]:
    """Started, and frozen once it holds the write lock of `database` (SIGCONT: it commits and ends)."""
    writer = subprocess.Popen([sys.executable, "-c", SCRIPT, str(database)], stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "holding"
    return writer


DUETIME_SCRIPT = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from duetime.adapters.sqlite.db import Database
db = Database(sys.argv[1])
with db.write() as conn:
    conn.execute("UPDATE messages SET receive_count = receive_count WHERE 0")
    print("holding", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)  # frozen mid-write, holding the lock file and SQLite's lock
"""
LAYERS = Path(__file__).resolve().parents[1] / "layers" / "core" / "python"


def frozen_duetime_writer(database: str | Path) -> subprocess.Popen[str]:
    """As frozen_writer, but a duetime Database's write: it holds the lock between processes too."""
    args = [sys.executable, "-c", DUETIME_SCRIPT, str(database), str(LAYERS)]
    writer = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "holding"
    return writer
