#!/usr/bin/env python3
"""Commits of the replicated log over virtual ESP-NOW dongles, against what the air allows.

Issue 16, item 10: commits per second over the virtual dongles of `conclave demo` against what
ESP-NOW's air carries (250-byte frames at about 214 kbit/s, about 26,750 bytes a second).

What the program does:

1. builds conclave with `cargo build --release -p conclave-gateway` when `--conclave-bin` does
   not exist;
2. for each air (`--air-kbps 0` first: no air-time model, frames overlap freely as they always
   did in the demo; then the model at `--air-kbps`, 214 by default), starts
   `conclave demo --nodes 3 --log --seed S [--air-kbps K]` through a pipe with its `TMPDIR` in
   a temporary directory of this program's, reads the admin URLs it prints and waits until
   every node names the same leader; then asks the demo's `air` command twice, `--idle-seconds`
   apart, for what the air carries while no client writes (heartbeats, pings);
3. for each value size (`--value-bytes`, 64 and 16) and client count (`--clients`, 1, 8 and
   32), writes distinct keys to the leader's admin API for `--warmup` + `--seconds` seconds:
   each client is one kept-alive HTTP/1.1 connection sending `PUT /v1/kv/{key}`
   `{"value": ...}` as soon as its last write is answered; a write counts once it is answered
   200 (committed on a majority, each node having fsynced it, and applied). A 421 (the leader
   moved) is followed to the `leader_admin_url` it names and the write sent again. Before and
   after, the demo's `air` command gives the frames and bytes the air carried (each frame's
   payload and ESP-NOW's 43 bytes of framing);
4. prints, per measurement: commits/s, p50 and p99 (of the counted seconds); air bytes per
   commit beyond the idle traffic; the air's load (bytes a second over 26,750 at 214 kbit/s);
   and the air's limit for that cost, (air rate - idle traffic) / bytes per commit, the most
   commits a second a real radio could carry with the same frames;
5. stops each demo with `quit` and checks that it exits 0.

Standard library only (Python 3.11). Run from anywhere:
    python3 bench/espnow_commit.py --conclave-bin target/release/conclave
Exit code: 0 when every measurement ran and every demo exited 0, 2 on an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

# The helpers of the UDP benchmark, shared; no __pycache__ left in bench/ for importing them.
sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kv_commit import (  # noqa: E402
    REPO, BenchError, agreed_leader, ensure_conclave, log, machine, percentile, request,
    version_of,
)

CLIENT_COUNTS = (1, 8, 32)
VALUE_SIZES = (64, 16)
# ESP-NOW's usable rate as docs/benchmarks.md counts it ("Next to the physical limits").
AIR_KBPS = 214
REQUEST_TIMEOUT = 30.0


# ---------------------------------------------------------------------------------------------
# the demo


class DemoProcess:
    """`conclave demo` through pipes: its stdout read line by line on a thread, commands
    written to its stdin."""

    def __init__(self, binary: Path, nodes: int, seed: int, air_kbps: int, tmp: Path) -> None:
        self.argv = [str(binary), "demo", "--nodes", str(nodes), "--log", "--seed", str(seed)]
        if air_kbps:
            self.argv += ["--air-kbps", str(air_kbps)]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CONCLAVE", "RUST_LOG"))}
        env["TMPDIR"] = str(tmp)  # the demo's directory and its log file
        env["NO_COLOR"] = "1"
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env, text=True, bufsize=1, start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.admin: dict[str, str] = {}
        self.metrics: dict[str, str] = {}

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_line(self, what: str, matches, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.0, left))
            except queue.Empty:
                line = None
                left = 0
            if line is None:
                tail = "\n".join(self.seen[-20:])
                ended = "the demo ended" if left > 0 else f"not within {timeout:.0f} s"
                raise BenchError(f"no {what} ({ended}); the demo's last lines:\n{tail}")
            self.seen.append(line)
            if matches(line):
                return line

    def send(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def read_endpoints(self, nodes: int) -> None:
        for n in range(1, nodes + 1):
            name = f"node-{n}"
            line = self.wait_line(f"{name}'s admin URL",
                                  lambda l, name=name: l.strip().startswith(name + " ") and " admin http://" in l)
            words = line.split()
            self.admin[name] = words[words.index("admin") + 1]
            self.metrics[name] = words[words.index("metrics") + 1]

    def frames_sent(self) -> dict[str, float]:
        """Frames every node sent over its dongle so far, by kind, from their /metrics."""
        kinds: dict[str, float] = {}
        for url in self.metrics.values():
            answer = request(urlsplit(url).port, "GET", "/metrics", timeout=5)
            if answer is None or answer[0] != 200:
                continue
            for line in answer[1].decode(errors="replace").splitlines():
                if line.startswith("conclave_frames_total{") and 'direction="out"' in line:
                    kind = line.split('kind="', 1)[1].split('"', 1)[0]
                    kinds[kind] = kinds.get(kind, 0.0) + float(line.split()[-1])
        return kinds

    def air(self) -> tuple[int, int]:
        """(frames, bytes on the air) since the demo started, from its `air` command."""
        self.send("air")
        line = self.wait_line("the reply to air", lambda l: "> air: " in l)
        words = line.split("> air: ", 1)[1].split()
        return int(words[0]), int(words[2])

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def leader(self) -> str | None:
        """The leader every node names, if they agree."""
        return agreed_leader({name: urlsplit(url).port for name, url in self.admin.items()})

    def wait_leader(self, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"the demo exited ({self.proc.returncode}):\n" + "\n".join(self.seen[-20:]))
            leader = self.leader()
            if leader is not None:
                return leader
            time.sleep(0.2)
        raise BenchError(f"no leader every node agrees on within {timeout:.0f} s")

    def quit(self) -> int:
        with contextlib.suppress(OSError):
            self.send("quit")
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            raise BenchError("the demo did not exit within 60 s of quit") from None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


# ---------------------------------------------------------------------------------------------
# load


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a Content-Length body (the admin API's): status and body."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return status, body


async def one_client(url: str, keys, value: str, start: float, stop: float, out: dict) -> None:
    target = urlsplit(url)
    reader, writer = await asyncio.open_connection(target.hostname, target.port)
    body = json.dumps({"value": value}).encode()
    try:
        key = None
        while True:
            sent = time.monotonic()
            if sent >= stop:
                break
            if key is None:
                key = next(keys)
            writer.write(f"PUT /v1/kv/{key} HTTP/1.1\r\nHost: {target.netloc}\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                         .encode() + body)
            try:
                status, answer = await asyncio.wait_for(read_answer(reader), REQUEST_TIMEOUT)
            except asyncio.TimeoutError:
                out["errors"]["timeout"] = out["errors"].get("timeout", 0) + 1
                break
            done = time.monotonic()
            if status == 421:
                # The leader moved: the same write to the one the node names.
                out["redirects"] += 1
                leader_url = json.loads(answer or b"{}").get("leader_admin_url")
                writer.close()
                if not leader_url:
                    await asyncio.sleep(0.1)
                    leader_url = url
                target = urlsplit(leader_url)
                reader, writer = await asyncio.open_connection(target.hostname, target.port)
                continue
            key = None
            if status == 200:
                out["all"] += 1
                if start <= done <= stop:
                    out["latencies"].append(done - sent)
            else:
                out["errors"][status] = out["errors"].get(status, 0) + 1
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@dataclass
class Measurement:
    commits_per_s: float
    p50_ms: float
    p99_ms: float
    commits_all: int
    frames: int
    air_bytes: int
    elapsed: float
    demo_cpu_percent: float
    errors: dict
    redirects: int
    kinds: dict


def measure(demo: DemoProcess, leader_url: str, clients: int, value_bytes: int,
            args: argparse.Namespace, tag: str) -> Measurement:
    value = "v" * value_bytes
    out = {"latencies": [], "errors": {}, "redirects": 0, "all": 0}
    counter = iter(range(10**9))
    keys = (f"{tag}{n}" for n in counter)

    async def main() -> None:
        begin = time.monotonic() + 0.2
        start = begin + args.warmup
        stop = start + args.seconds
        await asyncio.gather(*(one_client(leader_url, keys, value, start, stop, out) for _ in range(clients)))

    kinds0 = demo.frames_sent()
    frames0, bytes0 = demo.air()
    cpu0, t0 = demo.cpu_seconds(), time.monotonic()
    asyncio.run(main())
    frames1, bytes1 = demo.air()
    cpu1, t1 = demo.cpu_seconds(), time.monotonic()
    kinds1 = demo.frames_sent()
    latencies = sorted(out["latencies"])
    return Measurement(
        commits_per_s=len(latencies) / args.seconds,
        p50_ms=1000 * percentile(latencies, 50),
        p99_ms=1000 * percentile(latencies, 99),
        commits_all=out["all"],
        frames=frames1 - frames0,
        air_bytes=bytes1 - bytes0,
        elapsed=t1 - t0,
        demo_cpu_percent=100 * (cpu1 - cpu0) / (t1 - t0),
        errors=out["errors"],
        redirects=out["redirects"],
        kinds={k: v - kinds0.get(k, 0.0) for k, v in kinds1.items()},
    )


# ---------------------------------------------------------------------------------------------
# report


def fmt(value: float, digits: int = 1) -> str:
    return "-" if value != value else f"{value:.{digits}f}"


def run_air(binary: Path, air_kbps: int, args: argparse.Namespace, root: Path,
            value_sizes: list[int], client_counts: list[int]) -> bool:
    tmp = root / f"air-{air_kbps or 'untimed'}"
    tmp.mkdir()
    air_rate = args.reference_kbps * 1000 / 8  # bytes a second a real radio carries
    demo = DemoProcess(binary, args.nodes, args.seed, air_kbps, tmp)
    try:
        demo.read_endpoints(args.nodes)
        leader = demo.wait_leader()
        frames0, bytes0 = demo.air()
        t0 = time.monotonic()
        time.sleep(args.idle_seconds)
        frames1, bytes1 = demo.air()
        idle = (bytes1 - bytes0) / (time.monotonic() - t0)
        model = f"air time modelled at {air_kbps} kbit/s" if air_kbps else "no air-time model (frames overlap)"
        log()
        log(f"{' '.join(demo.argv[1:])}: {model}; leader {leader}")
        log(f"  idle: {(frames1 - frames0) / args.idle_seconds:.0f} frames/s, {idle:.0f} air bytes/s "
            f"({100 * idle / air_rate:.0f} % of {args.reference_kbps} kbit/s)")
        log("  value clients | commits/s  p50 ms  p99 ms | frames/commit  air B/commit | air load "
            "| air limit commits/s | demo CPU %")
        kinds_of = []
        for value_bytes in value_sizes:
            for clients in client_counts:
                leader = demo.wait_leader()
                tag = f"{secrets.token_hex(2)}c{clients}v{value_bytes}-"
                m = measure(demo, demo.admin[leader], clients, value_bytes, args, tag)
                # What the writes cost the air beyond what it carries idle.
                extra = max(0.0, m.air_bytes - idle * m.elapsed)
                per_commit = extra / m.commits_all if m.commits_all else float("nan")
                limit = (air_rate - idle) / per_commit if per_commit == per_commit and per_commit else float("nan")
                load = m.air_bytes / m.elapsed / air_rate
                log(f"  {value_bytes:>5} {clients:>7} | {m.commits_per_s:>9.0f} {fmt(m.p50_ms, 1):>7} "
                    f"{fmt(m.p99_ms, 1):>7} | {fmt(m.frames / m.commits_all if m.commits_all else float('nan'), 2):>13} "
                    f"{fmt(per_commit, 0):>13} | {100 * load:>6.0f} % | {fmt(limit, 0):>19} "
                    f"| {m.demo_cpu_percent:>10.0f}")
                if m.errors or m.redirects:
                    log(f"    answers other than 200 (not counted): {m.errors}; 421 redirects followed: {m.redirects}")
                kinds_of.append((value_bytes, clients, m))
        log("  frames the nodes sent per commit, by kind (their conclave_frames_total, warm-up included)")
        for value_bytes, clients, m in kinds_of:
            shown = sorted(((v, k) for k, v in m.kinds.items() if v > 0), reverse=True)
            per = ", ".join(f"{k} {v / m.commits_all:.2f}" for v, k in shown) if m.commits_all else "-"
            log(f"  {value_bytes:>5} {clients:>7} | {per}")
        code = demo.quit()
        log(f"  quit: the demo exited {code}")
        return code == 0
    except BaseException:
        demo.kill()
        raise


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conclave-bin", type=Path, default=REPO / "target" / "release" / "conclave")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1, help="the simulated air's seed")
    parser.add_argument("--air-kbps", type=int, default=AIR_KBPS,
                        help="the air-time model's rate for the second demo (0: only the demo without it)")
    parser.add_argument("--reference-kbps", type=int, default=AIR_KBPS,
                        help="the radio's rate the air load and limit are computed against")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time per value size and client count")
    parser.add_argument("--warmup", type=float, default=1.0, help="uncounted time before each measurement")
    parser.add_argument("--idle-seconds", type=float, default=3.0, help="how long the idle air is watched")
    parser.add_argument("--value-bytes", default=",".join(map(str, VALUE_SIZES)))
    parser.add_argument("--clients", default=",".join(map(str, CLIENT_COUNTS)))
    args = parser.parse_args()
    client_counts = [int(c) for c in args.clients.split(",")]
    value_sizes = [int(v) for v in args.value_bytes.split(",")]

    def stop_on_signal(signum, _frame):
        raise BenchError(f"stopped by signal {signum}")

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop_on_signal)

    tmp = None
    try:
        binary = ensure_conclave(args.conclave_bin.resolve())
        tmp = tempfile.TemporaryDirectory(prefix="conclave-espnow-bench-")
        root = Path(tmp.name)
        for line in machine():
            log(line)
        log(f"conclave: {binary} ({version_of([str(binary), '--version'])})")
        log(f"{args.nodes} nodes, values of {value_sizes} bytes, clients {client_counts}, "
            f"{args.seconds:.0f} s per measurement (+{args.warmup:.0f} s warm-up), distinct keys; "
            f"the air's reference: {args.reference_kbps} kbit/s = {args.reference_kbps * 125:.0f} bytes/s")
        ok = True
        for air_kbps in ([0, args.air_kbps] if args.air_kbps else [0]):
            ok &= run_air(binary, air_kbps, args, root, value_sizes, client_counts)
        return 0 if ok else 2
    except (BenchError, OSError, subprocess.SubprocessError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
