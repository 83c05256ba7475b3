"""The pieces `duetime local` on SQLite is fast with, each doing what it must: a send wakes a sleeping
receiver only when it would otherwise sleep past the message, handler threads are kept yet never make a
run wait, the HTTP bridge answers in one send, and the worker process lives and dies with `duetime local`."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
from duetime.adapters.sqlite.db import Database
from duetime.local.http_bridge import ApiServer
from duetime.worker.runners import RunnerThreads

from tests.e2e.helpers import iso_in, wait_for


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def waiter(db: Database, timeout: float) -> tuple[threading.Thread, list[float]]:
    """A thread waiting for a change from the current generation; it records how long it slept."""
    slept: list[float] = []
    db.wait_for_change(db.generation, 0.001)  # the first wait starts the watcher and counts as a change
    seen = db.generation

    def wait() -> None:
        started = time.monotonic()
        db.wait_for_change(seen, timeout)
        slept.append(time.monotonic() - started)

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    wait_for(lambda: db._waiters == 1, 5, interval=0.01, what="the waiter to sleep")
    return thread, slept


def test_a_send_visible_after_the_receivers_wake_up_leaves_them_asleep(tmp_path: Path) -> None:
    db = Database(tmp_path / "duetime.sqlite3")
    try:
        # Given a receiver asleep for up to 1.5 s
        thread, slept = waiter(db, 1.5)
        # When a commit makes a message visible only after that (and another process would not be involved)
        with db.write(wakes=True, visible_at_ms=wall_ms() + 60_000):
            pass
        thread.join(5)
        # Then it slept its time out, and only the generation moved
        assert slept and slept[0] >= 1.4

        # Given a receiver asleep again, When a message becomes visible before its wake-up
        thread, slept = waiter(db, 10)
        with db.write(wakes=True, visible_at_ms=wall_ms() + 100):
            pass
        thread.join(5)
        # Then it is woken at once
        assert slept and slept[0] < 1
    finally:
        db.close()


def test_a_send_without_a_visibility_wakes_every_receiver(tmp_path: Path) -> None:
    db = Database(tmp_path / "duetime.sqlite3")
    try:
        thread, slept = waiter(db, 10)
        db.notify_local()
        thread.join(5)
        assert slept and slept[0] < 1
    finally:
        db.close()


def test_runner_threads_are_kept_and_a_stuck_run_blocks_no_other() -> None:
    runners = RunnerThreads("test", max_idle=4)
    names: list[str] = []
    try:
        # Given one run after another, Then the second runs in the thread the first ran in
        for _ in range(2):
            done = threading.Event()
            runners.run(lambda done=done: (names.append(threading.current_thread().name), done.set()))
            assert done.wait(5)
            time.sleep(0.05)  # the thread puts itself back as idle after its run
        assert names[0] == names[1]

        # Given a run that never ends (a handler past its timeout runs on), When another is started
        stuck, second = threading.Event(), threading.Event()
        runners.run(lambda: stuck.wait(30))
        runners.run(second.set)
        # Then the other runs at once, in a thread of its own
        assert second.wait(5)
        stuck.set()
    finally:
        runners.close()


def test_the_bridge_answers_headers_and_body_in_one_segment() -> None:
    # The body used to follow the headers in a second send, held back by Nagle's algorithm until the
    # client's delayed ACK (~40 ms a request on a kept-alive connection).
    server = ApiServer(lambda event, context: {"statusCode": 200, "body": "x" * 50}, port=0).start()
    try:
        host, port = server.server.server_address[:2]
        with socket.create_connection((str(host), int(port))) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200") and first.endswith(b"x" * 50)
    finally:
        server.stop()


@pytest.mark.timeout(120)
def test_the_worker_process_runs_jobs_and_dies_with_duetime_local(tmp_path: Path) -> None:
    local, url, token = serving_local(tmp_path)
    try:
        # Given `duetime local` on SQLite, Then its workers are a child process of it (beside its second API process)
        wait_for(lambda: child_pids(local.pid, WORKER), 30, what="the worker process")
        children = child_pids(local.pid)
        # And a job posted over the API runs there
        headers = {"Authorization": f"Bearer {token}"}
        job = {"name": "one", "handler": "demo.echo", "schedule": {"at": iso_in(0.2)}, "payload": {"n": 1}}
        job_id = requests.post(f"{url}/jobs", json=job, headers=headers, timeout=10).json()["jobId"]

        def finished() -> bool:
            body = requests.get(f"{url}/jobs/{job_id}/executions", headers=headers, timeout=10).json()
            return bool(body["executions"]) and body["executions"][0]["status"] == "succeeded"

        wait_for(finished, 30, interval=0.2, what="the job to run")
        # When `duetime local` is killed (SIGKILL), Then its worker process and its second API process end with it
        local.kill()
        local.wait(10)
        wait_for(lambda: not any(alive(pid) for pid in children), 10, interval=0.1, what="its children to end")
    finally:
        if local.poll() is None:
            local.kill()


def test_a_stopped_duetime_local_stops_its_worker_process(tmp_path: Path) -> None:
    local, _, _ = serving_local(tmp_path)
    try:
        wait_for(lambda: child_pids(local.pid, WORKER), 30, what="the worker process")
        stops_with_its_children(local, child_pids(local.pid))
    finally:
        if local.poll() is None:
            local.kill()


def test_the_projects_handlers_are_accepted_as_soon_as_duetime_local_says_it_serves(tmp_path: Path) -> None:
    # The workers announce their handlers from the child process: `duetime local` prints its API line only
    # after they have, so the first request naming one is accepted (no window where it is "not served").
    (tmp_path / "invoices.py").write_text(
        "from duetime import handler\n\n\n@handler('invoices.send')\ndef send(ctx):\n    return ctx.payload\n"
    )
    command = [sys.executable, "-m", "duetime.cli", "local", "--port", "0", "--data-dir", str(tmp_path / "d")]
    out = tmp_path / "local.out"
    with open(out, "wb") as sink:
        local = subprocess.Popen(
            [*command, "--handlers", "invoices"], stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path
        )
    try:
        text = wait_for(lambda: "token:" in out.read_text() and out.read_text(), 60, what="duetime local to serve")
        url = text.split("API:", 1)[1].split()[0]
        token = text.split("token:", 1)[1].split()[0]
        job = {"name": "first", "handler": "invoices.send", "schedule": {"at": iso_in(0.2)}}
        answer = requests.post(f"{url}/jobs", json=job, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert answer.status_code == 201, answer.text
    finally:
        local.send_signal(signal.SIGTERM)
        local.wait(30)


def serving_local(tmp_path: Path, *options: str) -> tuple[subprocess.Popen[bytes], str, str]:
    """`duetime local` (with `options`) started from `tmp_path` on a data dir under it, once it serves: the
    process, its API URL and the first user's token."""
    command = [sys.executable, "-m", "duetime.cli", "local", "--port", "0", "--data-dir", str(tmp_path / "d")]
    out = tmp_path / "local.out"
    with open(out, "wb") as sink:
        local = subprocess.Popen([*command, *options], stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        text = wait_for(lambda: "token:" in out.read_text() and out.read_text(), 60, what="duetime local to serve")
    except BaseException:
        local.kill()
        raise
    return local, text.split("API:", 1)[1].split()[0], text.split("token:", 1)[1].split()[0]


def stops_with_its_children(local: subprocess.Popen[bytes], children: list[int]) -> None:
    """Stop `duetime local` (SIGTERM) and check it ended well, its `children` with it."""
    local.send_signal(signal.SIGTERM)
    assert local.wait(30) == 0
    assert not any(alive(pid) for pid in children)


# What a child process of `duetime local` runs (its command line names its module).
WORKER = "duetime.local.worker_process"


def child_pids(pid: int, running: str | None = None) -> list[int]:
    """The child processes of `pid`: all of them, or those whose command line names `running`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if int(fields[1]) == pid and (running is None or running in command):
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended; its parent (killed) no longer reaps it


@pytest.mark.timeout(120)
def test_a_second_api_process_answers_on_the_same_listener_and_stops_with_duetime_local(tmp_path: Path) -> None:
    from duetime.local.system import LocalSystem

    system = LocalSystem(tmp_path / "d", port=0, workers=0, backend="sqlite", api_processes=2).start()
    try:
        assert system.api is not None and system.ports is not None
        children = [child.process.pid for child in system.api_children if child.process]
        assert len(children) == 1 and alive(children[0])
        # Another server cannot take the port: the processes share one socket, not SO_REUSEPORT
        host, port = system.api.server.server_address[:2]
        with pytest.raises(OSError):
            ApiServer(lambda event, context: {"statusCode": 200}, port=int(port), host=str(host))
        # Given this process no longer accepts connections, When a job is posted on a new connection
        system.api.server.shutdown()
        headers = {"Authorization": f"Bearer {system.token()}"}
        job = {"name": "via-child", "handler": "demo.echo", "schedule": {"at": iso_in(3600)}}
        answer = requests.post(f"{system.api_url}/jobs", json=job, headers=headers, timeout=30)
        # Then the other process answered it, and the job is in the one database
        assert answer.status_code == 201, answer.text
        stored = system.ports.store.get_job(answer.json()["jobId"])
        assert stored is not None and stored.name == "via-child"
    finally:
        system.stop()
    # And stopping `duetime local` stopped it
    assert not alive(children[0])


@pytest.mark.timeout(120)
def test_two_worker_processes_run_two_runs_due_together_one_each_and_stop_with_duetime_local(tmp_path: Path) -> None:
    local, url, token = serving_local(tmp_path, "--worker-processes", "2", "--workers", "1")
    try:
        # Given `duetime local --worker-processes 2 --workers 1`: two worker processes of one slot each
        wait_for(lambda: len(child_pids(local.pid, WORKER)) == 2, 30, what="2 workers")
        children = child_pids(local.pid)  # and the second API process
        # When two runs that each take 3 s are due at one instant
        headers = {"Authorization": f"Bearer {token}"}
        at = iso_in(2)
        jobs = [
            requests.post(
                f"{url}/jobs",
                json={"name": f"s{n}", "handler": "demo.sleep", "schedule": {"at": at}, "payload": {"seconds": 3}},
                headers=headers,
                timeout=10,
            ).json()["jobId"]
            for n in range(2)
        ]

        def runs() -> list[dict] | None:
            found = []
            for job_id in jobs:
                body = requests.get(f"{url}/jobs/{job_id}/executions", headers=headers, timeout=10).json()
                if not body["executions"] or body["executions"][0]["status"] != "succeeded":
                    return None
                found.append(body["executions"][0])
            return found

        ran = wait_for(runs, 60, interval=0.2, what="both runs to succeed")
        # Then each process ran one (a process whose one slot is taken receives nothing until it is free)
        assert len({run["workerId"] for run in ran}) == 2, ran
        # And stopping `duetime local` stops both
        stops_with_its_children(local, children)
    finally:
        if local.poll() is None:
            local.kill()
