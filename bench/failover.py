"""Failure detection: `duetime worker` processes killed mid-job (SIGKILL), time until the next attempt starts.

`duetime local` runs in this process with no worker threads; victim worker processes (concurrency 1) each
take one long job; once every job is running, a spare worker process starts and the victims are killed.
Detection time is from the kill to attempt 2's startedAt, read back from the executions table.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.domain.models import Execution, JobSpec, format_time, to_ms
from duetime.service.jobs import submit_job

from bench.common import ROOT
from bench.lateness import OWNER, BenchSystem


def start_worker(data_dir: str, worker_id: str, concurrency: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "layers" / "core" / "python"))
    cmd = [sys.executable, "-m", "duetime.cli", "worker", "--data-dir", data_dir, "--worker-id", worker_id]
    cmd += ["--concurrency", str(concurrency)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)


def wait_ready(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    """A worker prints one line when its receive loop starts."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = proc.stdout.readline()
    if not line or time.monotonic() > deadline:
        raise RuntimeError("worker process did not start")


def rows(bench: BenchSystem, job_ids: set[str]) -> dict[str, Execution]:
    return {e.job_id: e for e in bench.executions() if e.job_id in job_ids}


def measure(trials: int = 3, lease_seconds: int = 30, job_seconds: int = 90) -> dict[str, Any]:
    bench = BenchSystem("failover", workers=0, lease_seconds=lease_seconds, shards=2)
    data_dir = str(bench.system.data_dir)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        victims = [start_worker(data_dir, f"victim-{i}", 1) for i in range(trials)]
        procs += victims
        for proc in victims:
            wait_ready(proc)
        due = datetime.now(UTC) + timedelta(seconds=2)
        job_ids = set()
        for i in range(trials):
            body = {
                "name": f"failover-{i}",
                "handler": "demo.sleep",
                "payload": {"seconds": job_seconds},
                "timeoutSeconds": job_seconds + 60,
                "schedule": {"at": format_time(due)},
            }
            job, _ = submit_job(bench.submit_ports, OWNER, JobSpec.model_validate(body))
            job_ids.add(job.job_id)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            current = rows(bench, job_ids)
            if len(current) == trials and all(e.status.value == "running" for e in current.values()):
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("the jobs did not all start on the victim workers")
        spare = start_worker(data_dir, "spare", trials + 1)
        procs.append(spare)
        leases = {job_id: e.lease_until for job_id, e in current.items()}
        for proc in victims:
            proc.send_signal(signal.SIGKILL)
        killed_at = datetime.now(UTC)
        for proc in victims:
            proc.wait(timeout=10)
        deadline = time.monotonic() + lease_seconds + 30
        while time.monotonic() < deadline:
            current = rows(bench, job_ids)
            if all(e.attempt >= 2 for e in current.values()):
                break
            time.sleep(0.2)
        detections, after_lease = [], []
        for job_id, execution in current.items():
            if execution.attempt < 2 or len(execution.attempts) < 2:
                continue
            restarted = execution.attempts[1].started_at
            detections.append((to_ms(restarted) - to_ms(killed_at)) / 1000)
            lease_end = leases[job_id]
            if lease_end is not None:
                after_lease.append((to_ms(restarted) - to_ms(lease_end)) / 1000)
        return {
            "trials": trials,
            "leaseSeconds": lease_seconds,
            "restarted": len(detections),
            "detectionSeconds": sorted(round(d, 2) for d in detections),
            "maxDetectionSeconds": round(max(detections), 2) if detections else None,
            "afterLeaseEndSeconds": sorted(round(d, 2) for d in after_lease),
            "targetSeconds": lease_seconds + 2,
        }
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        bench.stop()
