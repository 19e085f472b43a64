#!/usr/bin/env python3
"""A replayed-Hello flood against the leader of three real `conclave` processes (issue 15).

One `Hello` a follower really sent is captured off the wire and played back to the leader from
another address, as fast as this machine sends, for `--seconds`; `--runs` times, each with a
fresh cluster. Before the fix, such a flood deposed the leader in one run of two and made it
write a warning per datagram. What each run prints:

- the leader changes: the growth of `conclave_leader_changes_total` on each node (the largest
  of the three is the run's figure; the target is 0) and whether the term moved;
- the status samples (every `--poll-ms`, from every node) in which a node named no leader;
- the log lines the three nodes wrote during the flood (at the `info` level an operator runs
  with), and the bytes;
- what the flood sent, what came back to its socket, and what the leader counted in
  `conclave_frames_dropped_total{reason}`.

How the frame is captured: a 127.0.0.1 port of the attacker (`crates/protocol/examples/
replay_flood.rs`) is one more address in every node's `link.udp.peers`, where each node
announces itself, as a sniffer on the nodes' segment would hear them. The cluster runs without a
key, as it may on loopback, so that the attacker can read which frame is a `Hello`; it sends the
frame's bytes unchanged, which is all a replay needs with a key too.

Timings are DESIGN §11's failover setting (heartbeat 50 ms, election timeout 250-500 ms), the
tightest the benchmarks use. Every process gets its own session and dies with this program;
the flood goes to 127.0.0.1 only and stops by itself.

Standard library only (Python 3.11). `python3 bench/replay_flood.py [--runs 5] [--seconds 30]`;
it builds the release binary and the example when they are missing.
Exit code: 0 when no run saw a leader change, 1 otherwise, 2 on an error.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import http.client
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import cpu_model

REPO = Path(__file__).resolve().parent.parent
NAMES = ["gw-a", "gw-b", "gw-c"]
CLUSTER = "flood-bench"
HTTP_TIMEOUT_S = 0.5
START_TIMEOUT_S = 60.0


class BenchError(Exception):
    """Ends the benchmark with a clear message."""


def log(message: str = "") -> None:
    print(message, flush=True)


def own_session_dying_with_parent() -> None:
    """In the child before exec: a session of its own, and SIGKILL when this program dies."""
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def loopback_port(kind: int, taken: set[int]) -> int:
    for _ in range(100):
        with socket.socket(socket.AF_INET, kind) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in taken:
            taken.add(port)
            return port
    raise BenchError("no free loopback port in 100 tries")


def http_get(port: int, path: str) -> tuple[int, bytes] | None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def status(port: int) -> dict | None:
    answer = http_get(port, "/v1/status")
    if answer is None or answer[0] != 200:
        return None
    with contextlib.suppress(ValueError):
        return json.loads(answer[1])
    return None


def metric_values(port: int) -> dict[str, float]:
    """Every series of the node's /metrics page, by its name with labels."""
    answer = http_get(port, "/metrics")
    if answer is None or answer[0] != 200:
        return {}
    values = {}
    for line in answer[1].decode(errors="replace").splitlines():
        if line.startswith("#") or " " not in line:
            continue
        series, value = line.rsplit(" ", 1)
        with contextlib.suppress(ValueError):
            values[series] = float(value)
    return values


def line_count(path: Path) -> tuple[int, int]:
    try:
        data = path.read_bytes()
    except OSError:
        return 0, 0
    return data.count(b"\n"), len(data)


@dataclass
class Node:
    name: str
    udp: int
    admin: int
    metrics: int
    log_path: Path
    proc: subprocess.Popen | None = None


@dataclass
class RunResult:
    leader: str = "-"
    leader_changes: dict[str, float] = field(default_factory=dict)
    term_before: int = 0
    term_after: int = 0
    samples: int = 0
    leaderless_samples: int = 0
    unanswered_samples: int = 0
    log_lines: int = 0
    log_bytes: int = 0
    flood_line: str = ""
    dropped: dict[str, float] = field(default_factory=dict)


def write_configs(root: Path, taken: set[int], tap: int) -> dict[str, Node]:
    nodes = {
        name: Node(
            name,
            loopback_port(socket.SOCK_DGRAM, taken),
            loopback_port(socket.SOCK_STREAM, taken),
            loopback_port(socket.SOCK_STREAM, taken),
            root / f"{name}.log",
        )
        for name in NAMES
    }
    q = json.dumps  # a JSON string is a TOML basic string
    for node in nodes.values():
        peers = [f"127.0.0.1:{other.udp}" for other in nodes.values() if other is not node]
        peers.append(f"127.0.0.1:{tap}")
        (root / f"{node.name}.toml").write_text(
            f"""# generated by bench/replay_flood.py
[node]
id = {q(node.name)}
data_dir = {q(str(root / "data" / node.name))}

[cluster]
id = {q(CLUSTER)}
voters = [{", ".join(q(n) for n in NAMES)}]

[election]
mode = "raft"

[election.raft]
quorum = "voters"
heartbeat_ms = 50
election_timeout_min_ms = 250
election_timeout_max_ms = 500

[link.udp]
listen = {q(f"127.0.0.1:{node.udp}")}
peers = [{", ".join(q(p) for p in peers)}]

[admin]
listen = {q(f"127.0.0.1:{node.admin}")}

[metrics]
listen = {q(f"127.0.0.1:{node.metrics}")}
"""
        )
    return nodes


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("CONCLAVE", "RUST_LOG"))}


def read_line(proc: subprocess.Popen, prefix: str, deadline: float) -> str:
    """The next line of the flooder's output that starts with `prefix`."""
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise BenchError(f"the flooder exited (code {proc.wait()}) before saying {prefix!r}")
        line = line.strip()
        if line.startswith(prefix):
            return line
    raise BenchError(f"the flooder did not say {prefix!r} in time")


def agreed_leader(nodes: dict[str, Node]) -> tuple[str, int] | None:
    views = [status(node.admin) for node in nodes.values()]
    if any(view is None for view in views):
        return None
    pairs = {(view.get("leader"), int(view.get("term", 0))) for view in views}
    if len(pairs) == 1:
        leader, term = pairs.pop()
        if leader:
            return leader, term
    return None


def one_run(index: int, args: argparse.Namespace) -> RunResult:
    result = RunResult()
    with tempfile.TemporaryDirectory(prefix="conclave-flood-") as tmp:
        root = Path(tmp)
        taken: set[int] = set()
        tap = loopback_port(socket.SOCK_DGRAM, taken)
        nodes = write_configs(root, taken, tap)
        env = clean_env()
        procs: list[subprocess.Popen] = []
        flooder = subprocess.Popen(
            [str(args.flooder_bin), "--tap", f"127.0.0.1:{tap}", "--cluster", CLUSTER,
             "--ids", ",".join(NAMES), "--seconds", str(args.seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            preexec_fn=own_session_dying_with_parent,
        )
        procs.append(flooder)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            read_line(flooder, "listening", deadline)
            for node in nodes.values():
                with open(node.log_path, "wb") as out:
                    node.proc = subprocess.Popen(
                        [str(args.conclave_bin), "run", "--config", str(root / f"{node.name}.toml")],
                        cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=out,
                        stderr=subprocess.STDOUT, preexec_fn=own_session_dying_with_parent,
                    )
                procs.append(node.proc)
            for _ in NAMES:
                log(f"  run {index}: {read_line(flooder, 'captured', deadline)}")
            # Three seconds of one agreed leader before the flood.
            stable_since, agreed = None, None
            while True:
                if time.monotonic() > deadline:
                    raise BenchError(f"no stable leader within {START_TIMEOUT_S:.0f} s")
                now = agreed_leader(nodes)
                if now is None or now != agreed:
                    stable_since, agreed = time.monotonic(), now
                elif time.monotonic() - stable_since >= args.settle:
                    break
                time.sleep(0.05)
            leader, term = agreed
            result.leader, result.term_before = leader, term
            before = {name: metric_values(node.metrics) for name, node in nodes.items()}
            lines_before = {name: line_count(node.log_path) for name, node in nodes.items()}

            assert flooder.stdin is not None
            flooder.stdin.write(f"127.0.0.1:{nodes[leader].udp} {leader}\n")
            flooder.stdin.flush()
            log(f"  run {index}: {read_line(flooder, 'flooding', time.monotonic() + 10)}")
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                for node in nodes.values():
                    view = status(node.admin)
                    result.samples += 1
                    if view is None:
                        result.unanswered_samples += 1
                    elif not view.get("leader"):
                        result.leaderless_samples += 1
                time.sleep(args.poll_ms / 1000)
            result.flood_line = read_line(flooder, "sent", time.monotonic() + 30)
            flooder.wait(timeout=10)
            # The last drop summary covers the flood's final seconds.
            time.sleep(args.after)

            for name, node in nodes.items():
                after = metric_values(node.metrics)
                key = "conclave_leader_changes_total"
                result.leader_changes[name] = after.get(key, 0.0) - before[name].get(key, 0.0)
                lines, size = line_count(node.log_path)
                result.log_lines += lines - lines_before[name][0]
                result.log_bytes += size - lines_before[name][1]
                if name == leader:
                    prefix = "conclave_frames_dropped_total{"
                    for series, value in after.items():
                        if series.startswith(prefix):
                            grown = value - before[name].get(series, 0.0)
                            if grown:
                                result.dropped[series[len(prefix):-1]] = grown
            view = status(nodes[leader].admin)
            result.term_after = int(view.get("term", 0)) if view else -1
        finally:
            for proc in procs:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
    return result


def build(args: argparse.Namespace) -> None:
    if not args.conclave_bin.exists():
        log("building conclave (release)...")
        subprocess.run(["cargo", "build", "--release", "-p", "conclave-gateway"], cwd=REPO, check=True)
    if not args.flooder_bin.exists():
        log("building the flooder (release example)...")
        subprocess.run(
            ["cargo", "build", "--release", "-p", "conclave-protocol", "--example", "replay_flood"],
            cwd=REPO, check=True,
        )


def machine() -> str:
    cpu = cpu_model()
    git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip() or "unknown"
    return f"machine: nproc {os.cpu_count()}, {cpu}, Linux {platform.release()}; git {git}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds of one leader before the flood")
    parser.add_argument("--after", type=float, default=11.0, help="seconds after the flood before the figures are read")
    parser.add_argument("--poll-ms", type=int, default=100)
    parser.add_argument("--conclave-bin", type=Path, default=REPO / "target/release/conclave")
    parser.add_argument("--flooder-bin", type=Path, default=REPO / "target/release/examples/replay_flood")
    args = parser.parse_args()
    try:
        build(args)
        log(machine())
        log(f"{args.runs} runs, {args.seconds} s of flood each, status polled every {args.poll_ms} ms")
        results = []
        for index in range(1, args.runs + 1):
            result = one_run(index, args)
            results.append(result)
            changes = max(result.leader_changes.values(), default=0.0)
            log(
                f"run {index}: leader {result.leader}, term {result.term_before} -> {result.term_after}, "
                f"leader changes {changes:.0f} (per node {', '.join(f'{n} {v:.0f}' for n, v in sorted(result.leader_changes.items()))}), "
                f"samples without a leader {result.leaderless_samples}/{result.samples} "
                f"(unanswered {result.unanswered_samples}), log lines {result.log_lines} ({result.log_bytes} bytes)"
            )
            log(f"       flood: {result.flood_line}")
            dropped = ", ".join(f"{k} {v:.0f}" for k, v in sorted(result.dropped.items()))
            log(f"       leader's drops: {dropped or 'none'}")
        worst = max(max(r.leader_changes.values(), default=0.0) for r in results)
        total_lines = sum(r.log_lines for r in results)
        log(
            f"summary: leader changes per run {[int(max(r.leader_changes.values(), default=0)) for r in results]} "
            f"(target 0), log lines per run {[r.log_lines for r in results]} ({total_lines} in all)"
        )
        return 0 if worst == 0 else 1
    except (BenchError, subprocess.CalledProcessError) as err:
        log(f"error: {err}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
