#!/usr/bin/env python3
"""Time from a worker's death to its jobs being ready again: sessions against leases.

Issue 25, item 4: a worker killed with kill -9 while it holds a job. Held under a session, the
job is ready again once the session's TTL has passed on the leader without a keepalive (plus
the leader's upkeep and one commit); held with a lease, once the whole lease has passed.

What the program does:

1. starts three conclave nodes as bench/kv_commit.py does (release build, UDP on 127.0.0.1,
   `[log] enabled = true`, defaults otherwise) and waits for a leader;
2. sessions, `--runs` times: grants a session with `--ttl-ms`, enqueues a job and claims it
   under the session, starts the worker's keepalives as their own process
   (`conclave session keepalive ID --follow`, a keepalive every third of the TTL), waits for
   its first keepalive, kills it with SIGKILL, and polls the leader every 5 ms until the job
   is ready again;
3. leases, `--lease-runs` times: enqueues a job, claims it with `--lease-ms` (the API's
   default lease unless given), treats the worker as dead at once, and polls the same way;
4. prints every run's time from the kill to the job being ready, and the median of each.

Standard library only (Python 3.11):
    python3 bench/worker_death.py --conclave-bin target/release/conclave
Exit code: 0 when done, 2 on an error.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kv_commit import (  # noqa: E402  (the shared cluster of the benchmarks)
    REPO, BenchError, ConclaveCluster, ensure_conclave, log, machine, request, version_of,
)

POLL_S = 0.005


def call(port: int, method: str, path: str, body: dict | None = None) -> dict:
    answer = request(port, method, path, None if body is None else json.dumps(body).encode())
    if answer is None or answer[0] != 200:
        raise BenchError(f"{method} {path} answered {answer}")
    return json.loads(answer[1])


def wait_ready(port: int, job: int, bound_s: float) -> float:
    """Polls until `job` is ready: the monotonic time it was first seen so."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        answer = request(port, "GET", "/v1/jobs?state=ready&stale=true")
        if answer and answer[0] == 200 and any(j["id"] == job for j in json.loads(answer[1])["jobs"]):
            return time.monotonic()
        time.sleep(POLL_S)
    raise BenchError(f"job {job} not ready within {bound_s:.0f} s")


def one_session_run(binary: Path, port: int, ttl_ms: int, queue: str) -> float:
    session = call(port, "POST", "/v1/sessions", {"ttl_ms": ttl_ms})["session"]
    job = call(port, "POST", "/v1/jobs", {"payload": "p", "queue": queue})["job"]["id"]
    claimed = call(port, "POST", "/v1/jobs/claim", {"worker": "w", "queue": queue, "session": session})
    if claimed["job"]["id"] != job:
        raise BenchError(f"claimed {claimed['job']['id']}, not {job}")
    worker = subprocess.Popen(
        [str(binary), "session", "keepalive", str(session), "--follow",
         "--admin", f"http://127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    first = worker.stdout.readline()
    if "kept alive" not in first:
        worker.kill()
        raise BenchError(f"the worker's keepalives did not start: {first!r}")
    worker.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    worker.wait()
    return wait_ready(port, job, ttl_ms / 1000 + 30) - killed


def one_lease_run(port: int, lease_ms: int, queue: str) -> float:
    job = call(port, "POST", "/v1/jobs", {"payload": "p", "queue": queue})["job"]["id"]
    call(port, "POST", "/v1/jobs/claim", {"worker": "w", "queue": queue, "lease_ms": lease_ms})
    dead = time.monotonic()
    return wait_ready(port, job, lease_ms / 1000 + 30) - dead


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conclave-bin", type=Path, default=REPO / "target" / "release" / "conclave")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--ttl-ms", type=int, default=2000)
    parser.add_argument("--lease-runs", type=int, default=3)
    parser.add_argument("--lease-ms", type=int, default=30000)
    args = parser.parse_args()
    cluster = None
    try:
        binary = ensure_conclave(args.conclave_bin.resolve())
        with tempfile.TemporaryDirectory(prefix="conclave-worker-death-") as tmp:
            for line in machine():
                log(line)
            log(f"conclave: {binary} ({version_of([str(binary), '--version'])})")
            cluster = ConclaveCluster(Path(tmp), binary)
            cluster.start()
            leader = cluster.members[cluster.wait_leader()]
            log(f"leader {leader.name}; polling its copy every {POLL_S * 1000:.0f} ms")
            sessions = []
            for run in range(1, args.runs + 1):
                took = one_session_run(binary, leader.http_port, args.ttl_ms, f"s{run}")
                sessions.append(took)
                log(f"  session (TTL {args.ttl_ms} ms), run {run}: ready {took * 1000:.0f} ms after the kill")
            leases = []
            for run in range(1, args.lease_runs + 1):
                took = one_lease_run(leader.http_port, args.lease_ms, f"l{run}")
                leases.append(took)
                log(f"  lease ({args.lease_ms} ms), run {run}: ready {took * 1000:.0f} ms after the worker died")
            cluster.require_alive()
            log(f"median: session {statistics.median(sessions) * 1000:.0f} ms "
                f"(min {min(sessions) * 1000:.0f}, max {max(sessions) * 1000:.0f}); "
                f"lease {statistics.median(leases) * 1000:.0f} ms "
                f"(min {min(leases) * 1000:.0f}, max {max(leases) * 1000:.0f})")
            cluster.stop()
            cluster = None
        return 0
    except (BenchError, OSError, subprocess.SubprocessError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
