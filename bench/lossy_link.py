#!/usr/bin/env python3
"""Spurious elections on a lossy, jittery link: three idle conclave nodes behind a UDP relay.

The usual way to build this link is `tc qdisc ... netem loss 5% delay 20ms 10ms` between three
network namespaces. Kernels without the sch_netem module refuse that ("Specified qdisc kind is
unknown"), so this program builds the same link in user space, on 127.0.0.1:

- A relay owns one UDP socket per ordered pair of nodes: T[x][y] is "y as x sees it". Node x's
  `link.udp.peers` lists T[x][y] for each other node y. A datagram that arrives on T[x][y] from x
  is dropped with probability `--loss`, or else sent on to y's own listen address after a delay
  drawn uniformly from `--delay-ms` +- `--jitter-ms` (netem's default jitter, which reorders
  datagrams), *from* the socket T[y][x]. Nodes learn a peer's address from the source of its
  frames, so y learns x at T[y][x] and answers through the relay too. Every datagram between
  two nodes crosses the relay once, in each direction its own loss and delay.
- Each ordered pair has its own random generator, seeded from `--seed` (printed): the k-th
  datagram from x to y has the same fate in every run with that seed, and in every cluster of
  one run. Which datagram is the k-th depends on the nodes' timing, so runs are not replays.
- Three `conclave run` nodes per binary (raft, a pre-shared key, admin and metrics listeners on
  free ports, data directories in a temporary directory), at the built-in timings unless
  `--heartbeat-ms` / `--election-min-ms` / `--election-max-ms` are given; `--set KEY=VALUE`
  adds a setting to every node (`--set election.raft.adaptive_timeout=true`), `--variant
  KEY=VALUE[,KEY=VALUE]` runs each binary once more with those settings.

The program waits until all three nodes of a cluster name one leader in one term for
`--settle` seconds, then leaves them idle for `--seconds` while it asks every node's
`/v1/status` every `--poll-ms` and notes each change of its leader, term or role with the time.
At the start and at the end of that window it reads each node's metrics
(`conclave_elections_started_total{kind}`, `conclave_elections_won_total`,
`conclave_leader_changes_total`, `conclave_leaderless_seconds_total`) and prints for each node
the pre-votes and elections it started, the elections it won and the leader changes it saw in
the window, the term at its start and end, then every change with its time, and the node's own
`/v1/history` entries of the window. The spurious elections of a run are the terms the cluster
moved through after its first stable leader; its leader changes, the new leaders named.

Several `--conclave-bin` (each labelled by its path) and variants run at the same time, each
on its own relay and ports, so that "before" and "after" share the machine's conditions;
`--sequential` runs them one after the other.

The relay also checks that the nodes never talk to each other directly: every peer address a
node's `/v1/status` shows must be one of its relay sockets, and the UDP frames each node counts
as sent (`conclave_frames_total{direction="out"}`) must all have reached the relay (and those it
counts as received, admitted or dropped, must not outnumber what the relay delivered to it).
It prints, per direction, the datagrams relayed, dropped and delivered, how late the relay
delivered against the delay it drew (the machine's scheduling noise on top of the link's), and
the longest silences between the heartbeats the first leader's followers got (frames are
sealed: the heartbeats are taken to be the leader's most frequent datagram size). `--trace`
writes every datagram's fate to a file.

Every node runs in its own process group and is killed on the way out, also on Ctrl-C, SIGTERM
or an error; with PR_SET_PDEATHSIG the nodes die even if this program is killed.

Standard library only (Python 3.11). Run from anywhere:
    python3 bench/lossy_link.py --conclave-bin target/release/conclave --seconds 600
Exit code: 0 on a complete run in which no later binary or variant saw more spurious elections
than the first one; 1 when one did; 2 on an error, an incomplete run, or a node that talked to
another past the relay.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import http.client
import json
import math
import os
import platform
import random
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import (
    BenchError, PortPool, build_conclave, clean_env, cpu_model, die_with_parent, loadavg, log, run_quiet, stop_members,
)

REPO = Path(__file__).resolve().parent.parent
NAMES = ["gw-a", "gw-b", "gw-c"]

HTTP_TIMEOUT_S = 0.5
START_TIMEOUT_S = 60.0
# A leader hands over before it stops; that took a few seconds in a by-hand run.
STOP_GRACE_S = 10.0
# Counters are read from the nodes and from the relay at slightly different moments.
COUNT_SLACK = 3


# --------------------------------------------------------------------------------------------
# the link


def percentile(values: list[float], q: float) -> float:
    """Nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


@dataclass
class Direction:
    """What the relay did with the datagrams from one node to another."""

    received: int = 0
    dropped: int = 0
    delivered: int = 0
    send_errors: int = 0
    delays_ms: list[float] = field(default_factory=list)  # drawn, of the delivered ones
    late_ms: list[float] = field(default_factory=list)  # delivered after the drawn moment by
    delivered_at: list[tuple[float, int]] = field(default_factory=list)  # time.monotonic(), bytes


class LinkRelay(threading.Thread):
    """The emulated link between three nodes: one socket per ordered pair (see the module doc)."""

    def __init__(self, label: str, listen: dict[str, int], ports: PortPool, args: argparse.Namespace, seed: int,
                 trace: Path | None) -> None:
        super().__init__(name=f"relay {label}", daemon=True)
        self.listen = {name: ("127.0.0.1", port) for name, port in listen.items()}
        self.loss = args.loss
        self.low_ms = max(0.0, args.delay_ms - args.jitter_ms)
        self.high_ms = args.delay_ms + args.jitter_ms
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        # (x, y): T[x][y], the socket x sends to when it means y.
        self.sockets: dict[tuple[str, str], socket.socket] = {}
        self.directions: dict[tuple[str, str], Direction] = {}
        self.rngs: dict[tuple[str, str], random.Random] = {}
        self.foreign = 0  # datagrams on T[x][y] that did not come from x
        for x in listen:
            for y in listen:
                if x == y:
                    continue
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                sock.bind(("127.0.0.1", ports.take(socket.SOCK_DGRAM)))
                sock.setblocking(False)
                self.sockets[(x, y)] = sock
                self.directions[(x, y)] = Direction()
                self.rngs[(x, y)] = random.Random(f"{seed}:{x}->{y}")
        self.failure: str | None = None
        self.trace = None
        if trace is not None:
            self.trace = open(trace, "w")
            self.trace.write("monotonic_s,from,to,bytes,fate,delay_ms\n")
        self.origin = time.monotonic()

    def address(self, x: str, y: str) -> tuple[str, int]:
        """Where x sends what it means for y."""
        return self.sockets[(x, y)].getsockname()

    def run(self) -> None:
        selector = selectors.DefaultSelector()
        for pair, sock in self.sockets.items():
            selector.register(sock, selectors.EVENT_READ, pair)
        pending: list[tuple[float, int, tuple[str, str], float, bytes]] = []
        order = 0
        try:
            while not self.stopping.is_set():
                timeout = 0.1
                if pending:
                    timeout = max(0.0, min(timeout, pending[0][0] - time.monotonic()))
                for key, _ in selector.select(timeout):
                    order = self.take_in(key.fileobj, key.data, pending, order)
                now = time.monotonic()
                while pending and pending[0][0] <= now:
                    due, _, pair, drawn_ms, data = heapq.heappop(pending)
                    self.deliver(pair, data, drawn_ms, time.monotonic() - due)
        except Exception as err:  # noqa: BLE001 - reported by the main thread
            self.failure = f"relay stopped: {err!r}"
        finally:
            selector.close()

    def take_in(self, sock: socket.socket, pair: tuple[str, str], pending: list, order: int) -> int:
        x, _ = pair
        while True:
            try:
                data, source = sock.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                return order
            except OSError:
                # An ICMP error from an earlier send (a node not listening yet) surfaces here.
                continue
            arrived = time.monotonic()
            with self.lock:
                if source != self.listen[x]:
                    self.foreign += 1
                    continue
                direction = self.directions[pair]
                direction.received += 1
                rng = self.rngs[pair]
                if rng.random() < self.loss:
                    direction.dropped += 1
                    self.note(arrived, pair, len(data), "dropped", 0.0)
                    continue
                drawn_ms = rng.uniform(self.low_ms, self.high_ms)
                self.note(arrived, pair, len(data), "delayed", drawn_ms)
            heapq.heappush(pending, (arrived + drawn_ms / 1000.0, order, pair, drawn_ms, data))
            order += 1

    def note(self, at: float, pair: tuple[str, str], size: int, fate: str, delay_ms: float) -> None:
        if self.trace is not None:
            self.trace.write(f"{at - self.origin:.4f},{pair[0]},{pair[1]},{size},{fate},{delay_ms:.2f}\n")

    def deliver(self, pair: tuple[str, str], data: bytes, drawn_ms: float, late_s: float) -> None:
        x, y = pair
        direction = self.directions[pair]
        try:
            # From T[y][x]: y learns x at the relay's address and answers through it.
            self.sockets[(y, x)].sendto(data, self.listen[y])
        except OSError:
            with self.lock:
                direction.send_errors += 1
            return
        with self.lock:
            direction.delivered += 1
            direction.delays_ms.append(drawn_ms)
            direction.late_ms.append(late_s * 1000.0)
            direction.delivered_at.append((time.monotonic(), len(data)))

    def counts(self) -> dict[tuple[str, str], tuple[int, int, int]]:
        """(received, dropped, delivered) per direction, now."""
        with self.lock:
            return {pair: (d.received, d.dropped, d.delivered) for pair, d in self.directions.items()}

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(timeout=2.0)
        for sock in self.sockets.values():
            sock.close()
        if self.trace is not None:
            self.trace.close()
            self.trace = None


# --------------------------------------------------------------------------------------------
# HTTP views of a node


class HttpProbe:
    """One keep-alive HTTP connection to a node."""

    def __init__(self, port: int, path: str) -> None:
        self.port = port
        self.path = path
        self.conn: http.client.HTTPConnection | None = None

    def fetch_text(self) -> str | None:
        # A kept-alive connection the server closed while it was idle fails once: a new
        # connection gets one more try.
        for _ in range(2 if self.conn is not None else 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_TIMEOUT_S)
                self.conn.request("GET", self.path)
                response = self.conn.getresponse()
                data = response.read()
                if response.status != 200:
                    return None
                return data.decode("utf-8", errors="replace")
            except (OSError, http.client.HTTPException):
                self.close()
        return None

    def fetch(self) -> dict | None:
        text = self.fetch_text()
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None


@dataclass(frozen=True)
class View:
    """What one node says: the leader it names (None: none), its term and its role."""

    leader: str | None
    term: int
    role: str

    def __str__(self) -> str:
        return f"{self.leader or '-'}@{self.term} ({self.role})"


def parse_view(answer: dict | None) -> View | None:
    if answer is None:
        return None
    return View(answer.get("leader"), int(answer.get("term", 0)), str(answer.get("role", "?")))


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text: `name{labels}` to its value."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            out[key.strip()] = float(value)
    return out


def metric_sum(metrics: dict[str, float], name: str, *labels: str) -> float:
    """The sum of `name` over its series that carry every one of `labels` (`k="v"`)."""
    total = 0.0
    for key, value in metrics.items():
        base, _, rest = key.partition("{")
        if base == name and all(label in rest for label in labels):
            total += value
    return total


# --------------------------------------------------------------------------------------------
# one cluster: three nodes behind one relay


def toml_value(text: str) -> str:
    """`text` as a TOML value: kept when it is one (true, 5, "x", [..]), quoted otherwise."""
    try:
        tomllib.loads(f"v = {text}")
        return text
    except tomllib.TOMLDecodeError:
        return json.dumps(text)


def parse_setting(item: str) -> tuple[str, str, str]:
    """`section.key=value` to (section, key, TOML value)."""
    name, sep, value = item.partition("=")
    section, dot, key = name.strip().rpartition(".")
    if not sep or not dot or not section or not key:
        raise BenchError(f"setting {item!r}: expected SECTION.KEY=VALUE, e.g. election.raft.adaptive_timeout=true")
    return section, key, toml_value(value.strip())


@dataclass
class Node:
    name: str
    config: Path
    udp: int
    admin: int
    metrics: int
    log_path: Path
    proc: subprocess.Popen | None = None
    log_file: object | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "    (no log)"
        return "\n".join("    " + line for line in text[-lines:]) or "    (log is empty)"


@dataclass
class Change:
    at: float  # seconds from the start of the idle window (negative: while settling)
    node: str
    before: View | None
    after: View | None


@dataclass
class RunResult:
    label: str
    timings: str
    first_leader: str = ""
    start_term: int = 0
    end_terms: dict[str, int] = field(default_factory=dict)
    window_s: float = 0.0
    changes: list[Change] = field(default_factory=list)
    per_node: dict[str, dict[str, float]] = field(default_factory=dict)
    history: dict[str, list[str]] = field(default_factory=dict)
    polls: int = 0
    unanswered: int = 0
    relay_lines: list[str] = field(default_factory=list)
    route_problems: list[str] = field(default_factory=list)
    aborted: str = ""

    def terms_moved(self) -> int:
        return max(self.end_terms.values(), default=self.start_term) - self.start_term

    def new_leaders(self) -> list[tuple[float, str, int]]:
        """Each (leader, term) first named by some node in the window, after the first leader."""
        seen = {(self.first_leader, self.start_term)}
        out = []
        for change in self.changes:
            view = change.after
            if change.at < 0 or view is None or view.leader is None:
                continue
            if (view.leader, view.term) not in seen:
                seen.add((view.leader, view.term))
                out.append((change.at, view.leader, view.term))
        return out


class Cluster:
    """Three `conclave run` nodes of one binary, linked only through their own relay."""

    def __init__(self, label: str, binary: Path, settings: list[str], root: Path,
                 ports: PortPool, args: argparse.Namespace, seed: int) -> None:
        self.label = label
        self.binary = binary
        self.root = root
        self.env = clean_env(("CONCLAVE__", "CONCLAVE_", "RUST_LOG"))
        self.nodes: dict[str, Node] = {}
        udp = {n: ports.take(socket.SOCK_DGRAM) for n in NAMES}
        self.relay = LinkRelay(label, udp, ports, args, seed, root / "relay.csv" if args.trace else None)
        psk = root / "psk"
        psk.write_text(secrets.token_hex(32) + "\n")
        timing = []
        if args.heartbeat_ms is not None:
            timing.append(f"election.raft.heartbeat_ms={args.heartbeat_ms}")
        if args.election_min_ms is not None:
            timing.append(f"election.raft.election_timeout_min_ms={args.election_min_ms}")
        if args.election_max_ms is not None:
            timing.append(f"election.raft.election_timeout_max_ms={args.election_max_ms}")
        extra = [parse_setting(item) for item in timing + settings]
        for name in NAMES:
            node = Node(name, root / f"{name}.toml", udp[name], ports.take(), ports.take(), root / f"{name}.log")
            self.write_config(node, psk, extra)
            self.nodes[name] = node

    def write_config(self, node: Node, psk: Path, extra: list[tuple[str, str, str]]) -> None:
        q = json.dumps  # a JSON string is a valid TOML basic string
        peers = [self.relay.address(node.name, other) for other in NAMES if other != node.name]
        sections: dict[str, dict[str, str]] = {
            "node": {"id": q(node.name), "data_dir": q(str(self.root / "data" / node.name))},
            "cluster": {
                "id": q("lossy-link-bench"),
                "voters": "[" + ", ".join(q(n) for n in NAMES) + "]",
                "psk_file": q(str(psk)),
            },
            "link.udp": {
                "listen": q(f"127.0.0.1:{node.udp}"),
                "peers": "[" + ", ".join(q(f"{h}:{p}") for h, p in peers) + "]",
            },
            "admin": {"listen": q(f"127.0.0.1:{node.admin}")},
            "metrics": {"listen": q(f"127.0.0.1:{node.metrics}")},
        }
        for section, key, value in extra:
            sections.setdefault(section, {})[key] = value
        text = "# generated by bench/lossy_link.py\n"
        for section, keys in sections.items():
            text += f"\n[{section}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items())
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise BenchError(f"generated configuration {node.config} is not TOML: {err}\n{text}") from err
        node.config.write_text(text)
        check = run_quiet([str(self.binary), "check-config", str(node.config)], timeout=30, env=self.env)
        if check.returncode != 0:
            raise BenchError(f"{self.label}: conclave check-config {node.config} failed "
                             f"(exit {check.returncode}):\n{check.stdout}{check.stderr}")

    def start(self, log_filter: str) -> None:
        """Starts the relay, then the nodes (from the main thread: see `die_with_parent`)."""
        self.relay.start()
        for node in self.nodes.values():
            node.log_file = open(node.log_path, "ab")
            try:
                node.proc = subprocess.Popen(
                    [str(self.binary), "run", "--config", str(node.config), "--log", log_filter],
                    cwd=self.root, env=self.env, stdin=subprocess.DEVNULL,
                    stdout=node.log_file, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
                )
            except OSError as err:
                raise BenchError(f"cannot start {self.label} {node.name}: {err}") from err

    def require_alive(self, context: str) -> None:
        if self.relay.failure:
            raise BenchError(f"{self.label}: {self.relay.failure}")
        for node in self.nodes.values():
            if not node.alive():
                code = node.proc.returncode if node.proc is not None else None
                raise BenchError(f"{self.label} {node.name} exited {context} (exit code {code}); "
                                 f"last lines of {node.log_path}:\n{node.log_tail()}")

    def stop(self) -> int:
        """Stops every node and the relay; returns how many nodes were still running."""
        running = stop_members(self.nodes.values(), STOP_GRACE_S)
        self.relay.stop()
        return running


# --------------------------------------------------------------------------------------------
# phases of a run


def wait_stable(cluster: Cluster, settle: float, watcher: Watcher) -> tuple[str, int]:
    """Waits until all three nodes name one leader in one term, unchanged for `settle` s."""
    deadline = time.monotonic() + START_TIMEOUT_S + settle
    agreed, since = None, 0.0
    while True:
        cluster.require_alive("before the idle window")
        views = watcher.poll_once()
        now = time.monotonic()
        seen = {None if v is None else (v.leader, v.term) for v in views.values()}
        current = None
        if len(seen) == 1 and None not in seen:
            (current,) = seen
            if current[0] is None:
                current = None
        if current != agreed:
            agreed, since = current, now
        if agreed is not None and now - since >= settle:
            return agreed
        if now > deadline:
            shown = ", ".join(f"{n}: {v or 'no answer'}" for n, v in views.items())
            raise BenchError(f"{cluster.label}: no leader named by all three for {settle:.0f} s within "
                             f"{START_TIMEOUT_S + settle:.0f} s; last views: {shown}")
        time.sleep(0.1)


class Watcher(threading.Thread):
    """Asks each node of a cluster for its view every `interval` s and notes every change."""

    def __init__(self, cluster: Cluster, interval: float, result: RunResult) -> None:
        super().__init__(name=f"watch {cluster.label}", daemon=True)
        self.cluster = cluster
        self.interval = interval
        self.result = result
        self.probes = {name: HttpProbe(node.admin, "/v1/status") for name, node in cluster.nodes.items()}
        self.last: dict[str, View | None] = {}
        self.origin = time.monotonic()
        self.stopping = threading.Event()
        self.failure: str | None = None

    def poll_once(self) -> dict[str, View | None]:
        views = {}
        for name, probe in self.probes.items():
            view = parse_view(probe.fetch())
            at = time.monotonic() - self.origin
            self.result.polls += 1
            if view is None:
                self.result.unanswered += 1
            if name in self.last and view != self.last[name]:
                self.result.changes.append(Change(at, name, self.last[name], view))
            self.last[name] = view
            views[name] = view
        return views

    def run(self) -> None:
        try:
            next_at = time.monotonic()
            while not self.stopping.is_set():
                self.poll_once()
                next_at += self.interval
                self.stopping.wait(max(0.0, next_at - time.monotonic()))
        except Exception as err:  # noqa: BLE001 - reported by the main thread
            self.failure = f"watcher stopped: {err!r}"

    def stop(self) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(timeout=5.0)
        for probe in self.probes.values():
            probe.close()


def scrape(cluster: Cluster) -> dict[str, dict[str, float]]:
    out = {}
    for name, node in cluster.nodes.items():
        probe = HttpProbe(node.metrics, "/metrics")
        text = probe.fetch_text()
        probe.close()
        if text is None:
            raise BenchError(f"{cluster.label} {name}: no answer on its metrics listener 127.0.0.1:{node.metrics}")
        out[name] = parse_metrics(text)
    return out


COUNTED = {
    "pre-votes": ("conclave_elections_started_total", 'kind="pre_vote"'),
    "elections": ("conclave_elections_started_total", 'kind="election"'),
    "won": ("conclave_elections_won_total",),
    "leader changes": ("conclave_leader_changes_total",),
    "leaderless s": ("conclave_leaderless_seconds_total",),
}


def window_counts(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {what: metric_sum(after, *spec) - metric_sum(before, *spec) for what, spec in COUNTED.items()}


def check_routes(cluster: Cluster, result: RunResult) -> None:
    """Every datagram between nodes went through the relay: the nodes' routes are relay
    sockets, and what they counted as sent and received matches what the relay saw."""
    relay = cluster.relay
    for name, node in cluster.nodes.items():
        probe = HttpProbe(node.admin, "/v1/status")
        answer = probe.fetch() or {}
        probe.close()
        shown = {p.get("peer_id"): p.get("address") for p in answer.get("peers", [])}
        rtts = {p.get("peer_id"): p.get("rtt_ms") for p in answer.get("peers", [])}
        for other in NAMES:
            if other == name:
                continue
            host, port = relay.address(name, other)
            want = f"udp:{host}:{port}"
            if shown.get(other) != want:
                result.route_problems.append(f"{name} reaches {other} at {shown.get(other)}, not at the relay's {want}")
        result.relay_lines.append(
            f"{name}'s peers: " + ", ".join(f"{p} at {shown.get(p)} (rtt {rtts.get(p)} ms)" for p in sorted(shown)))
    counts_before = relay.counts()
    metrics = scrape(cluster)
    time.sleep(0.3)  # the relay takes in what was sent before the scrape
    counts_after = relay.counts()
    for name in NAMES:
        sent = metric_sum(metrics[name], "conclave_frames_total", 'link="udp"', 'direction="out"')
        taken_in = (metric_sum(metrics[name], "conclave_frames_total", 'link="udp"', 'direction="in"')
                    + metric_sum(metrics[name], "conclave_frames_dropped_total"))
        from_low = sum(c[0] for (x, _), c in counts_before.items() if x == name)
        from_high = sum(c[0] for (x, _), c in counts_after.items() if x == name)
        to_high = sum(c[2] for (_, y), c in counts_after.items() if y == name)
        ok_out = from_low - COUNT_SLACK <= sent <= from_high + COUNT_SLACK
        ok_in = taken_in <= to_high + COUNT_SLACK
        result.relay_lines.append(
            f"{name}: sent {sent:.0f} datagrams by its own count, the relay took {from_low}-{from_high} from it "
            f"({'match' if ok_out else 'MISMATCH'}); took in {taken_in:.0f} (admitted or dropped), the relay "
            f"delivered {to_high} to it ({'within' if ok_in else 'MORE THAN THE RELAY DELIVERED'})")
        if not ok_out:
            result.route_problems.append(f"{name} counted {sent:.0f} datagrams sent, the relay took {from_low}-{from_high}")
        if not ok_in:
            result.route_problems.append(f"{name} counted {taken_in:.0f} frames in, the relay delivered {to_high}")
    if relay.foreign:
        result.route_problems.append(f"the relay had {relay.foreign} datagrams from unexpected addresses")


def relay_report(cluster: Cluster, leader: str, origin: float, end: float) -> list[str]:
    lines = []
    relay = cluster.relay
    with relay.lock:
        directions = {pair: (d.received, d.dropped, d.delivered, d.send_errors, list(d.delays_ms), list(d.late_ms))
                      for pair, d in relay.directions.items()}
    total_in = total_drop = 0
    all_late: list[float] = []
    for (x, y), (received, dropped, delivered, errors, delays, late) in sorted(directions.items()):
        total_in += received
        total_drop += dropped
        all_late.extend(late)
        share = 100.0 * dropped / received if received else 0.0
        drawn = f"delay drawn {min(delays):.1f}-{max(delays):.1f} ms, mean {sum(delays) / len(delays):.1f}" if delays else "no delay drawn"
        lines.append(f"{x} -> {y}: {received:6} relayed, {dropped:4} dropped ({share:4.1f} %), {delivered:6} delivered"
                     + (f", {errors} send errors" if errors else "") + f"; {drawn}")
    share = 100.0 * total_drop / total_in if total_in else 0.0
    lines.append(f"all: {total_in} relayed, {total_drop} dropped ({share:.2f} %); delivered late by (ms) median "
                 f"{percentile(all_late, 0.5):.2f}, p99 {percentile(all_late, 0.99):.2f}, max {max(all_late, default=0):.2f}")
    lines.append(f"longest silences from the first leader {leader} while it led in the window "
                 f"({end - origin:.0f} s; ms between two heartbeats delivered): "
                 + "; ".join(f"to {y} " + ", ".join(f"{g:.0f}" for g in silences(relay, leader, y, origin, end))
                             for y in NAMES if y != leader))
    return lines


def silences(relay: LinkRelay, x: str, y: str, origin: float, end: float, count: int = 5) -> list[float]:
    """The `count` longest gaps, in ms, between the heartbeats the relay delivered from the
    leader x to y between `origin` and `end` (the window's edges count as deliveries).

    Frames are sealed, so the relay cannot read their kind; an idle leader's heartbeats are
    the datagrams it sends most often, all of one size, and that size stands for them."""
    with relay.lock:
        delivered = [(t, size) for t, size in relay.directions[(x, y)].delivered_at if origin <= t <= end]
    sizes = Counter(size for _, size in delivered)
    if not sizes:
        return []
    beat = sizes.most_common(1)[0][0]
    edges = [origin, *(t for t, size in delivered if size == beat), end]
    gaps = sorted(((b - a) * 1000.0 for a, b in zip(edges, edges[1:])), reverse=True)
    return gaps[:count]


def history_in_window(cluster: Cluster, since_unix_ms: int) -> dict[str, list[str]]:
    out = {}
    for name, node in cluster.nodes.items():
        probe = HttpProbe(node.admin, "/v1/history")
        answer = probe.fetch() or {}
        probe.close()
        entries = []
        for entry in answer.get("history", []):
            at = int(entry.get("at_unix_ms", 0))
            if at >= since_unix_ms:
                entries.append(f"+{(at - since_unix_ms) / 1000:.1f} s {entry.get('leader') or '-'}@{entry.get('term')} "
                               f"({entry.get('cause')})")
        out[name] = entries
    return out


# --------------------------------------------------------------------------------------------
# runs


@dataclass
class Plan:
    label: str
    binary: Path
    settings: list[str]


def raft_settings(binary: Path, args: argparse.Namespace, settings: list[str]) -> dict:
    """The `election.raft` settings a node of this run works with: the binary's built-in
    defaults (`conclave defaults`), then the timings and settings given here."""
    raft: dict = {}
    with contextlib.suppress(BenchError, tomllib.TOMLDecodeError, AttributeError):
        done = run_quiet([str(binary), "defaults"], timeout=30)
        if done.returncode == 0:
            raft = dict(tomllib.loads(done.stdout).get("election", {}).get("raft", {}))
    given = [("heartbeat_ms", args.heartbeat_ms), ("election_timeout_min_ms", args.election_min_ms),
             ("election_timeout_max_ms", args.election_max_ms)]
    raft.update({key: value for key, value in given if value is not None})
    for item in settings:
        section, key, value = parse_setting(item)
        if section == "election.raft":
            raft[key] = tomllib.loads(f"v = {value}")["v"]
    return raft


def timings_text(binary: Path, args: argparse.Namespace, settings: list[str]) -> str:
    raft = raft_settings(binary, args, settings)
    if not raft:
        parts = ["built-in timings"]
    else:
        adaptive = raft.get("adaptive_timeout", False)
        floor = raft.get("suspicion_floor_ms")
        parts = [f"heartbeat {raft.get('heartbeat_ms', '?')} ms, election timeout "
                 f"{raft.get('election_timeout_min_ms', '?')}-{raft.get('election_timeout_max_ms', '?')} ms, "
                 f"pre-vote {'on' if raft.get('pre_vote') else 'off'}, check-quorum "
                 f"{'on' if raft.get('check_quorum') else 'off'}, ranked timeouts "
                 f"{'on' if raft.get('ranked_timeouts') else 'off'}, adaptive detection "
                 + (f"on (floor {f'{floor} ms' if floor is not None else 'built in'})" if adaptive else "off")]
    if settings:
        parts.append("set here: " + " ".join(settings))
    return "; ".join(parts)


def bring_up(clusters: list[Cluster], results: dict[str, RunResult], args: argparse.Namespace) -> dict[str, Watcher]:
    """Starts the clusters and waits for each one's first stable leader; a cluster that finds
    none is marked aborted and left out of the window."""
    watchers = {}
    for cluster in clusters:
        log(f"\n== {cluster.label}: 3 nodes in {cluster.root}, relay sockets "
            + ", ".join(f"{x}->{y} {cluster.relay.address(x, y)[1]}" for (x, y) in sorted(cluster.relay.sockets)))
        cluster.start(args.conclave_log)
        watchers[cluster.label] = Watcher(cluster, args.poll_ms / 1000.0, results[cluster.label])
    ready = {}
    for cluster in clusters:
        started = time.monotonic()
        try:
            leader, term = wait_stable(cluster, args.settle, watchers[cluster.label])
        except BenchError as err:
            results[cluster.label].aborted = str(err)
            log(f"  !! {err}")
            continue
        results[cluster.label].first_leader, results[cluster.label].start_term = leader, term
        ready[cluster.label] = watchers[cluster.label]
        log(f"  {cluster.label}: {leader} leads in term {term}, all three agreed for {args.settle:.0f} s "
            f"({time.monotonic() - started:.1f} s after the start)")
    return ready


def progress_line(cluster: Cluster, result: RunResult, watcher: Watcher) -> str:
    term = max((v.term for v in watcher.last.values() if v), default=result.start_term)
    return f"{cluster.label}: {len(result.new_leaders())} new leader(s), term +{term - result.start_term}"


def idle_window(clusters: list[Cluster], results: dict[str, RunResult], watchers: dict[str, Watcher],
                args: argparse.Namespace) -> None:
    """The measured window: every cluster idle for `--seconds`, its nodes watched. A cluster
    that fails during it is marked aborted; the others go on."""
    active = [c for c in clusters if c.label in watchers]
    start_metrics = {c.label: scrape(c) for c in active}
    start_unix_ms = int(time.time() * 1000)
    origin = time.monotonic()
    for cluster in active:
        watcher = watchers[cluster.label]
        # Changes seen while settling get negative times; the window starts now.
        for change in results[cluster.label].changes:
            change.at -= origin - watcher.origin
        watcher.origin = origin
        results[cluster.label].polls = results[cluster.label].unanswered = 0
        watcher.start()
    log(f"\nidle window: {args.seconds:.0f} s from {time.strftime('%H:%M:%S', time.gmtime())} UTC "
        f"(load average {loadavg()})")
    next_report = origin + 60.0
    try:
        while active and time.monotonic() - origin < args.seconds:
            time.sleep(min(1.0, max(0.0, origin + args.seconds - time.monotonic())))
            for cluster in list(active):
                try:
                    cluster.require_alive("during the idle window")
                    if watchers[cluster.label].failure:
                        raise BenchError(f"{cluster.label}: {watchers[cluster.label].failure}")
                except BenchError as err:
                    results[cluster.label].aborted = str(err)
                    log(f"  !! {err}")
                    watchers[cluster.label].stop()
                    active.remove(cluster)
            if time.monotonic() >= next_report:
                next_report += 60.0
                log(f"  +{time.monotonic() - origin:.0f} s (load average {loadavg()}): "
                    + "; ".join(progress_line(c, results[c.label], watchers[c.label]) for c in active))
    finally:
        for cluster in active:
            watchers[cluster.label].stop()
    end = time.monotonic()
    elapsed = end - origin
    log(f"idle window over after {elapsed:.1f} s (load average {loadavg()})")
    for cluster in active:
        result = results[cluster.label]
        result.window_s = elapsed
        try:
            end_metrics = scrape(cluster)
            result.per_node = {n: window_counts(start_metrics[cluster.label][n], end_metrics[n]) for n in NAMES}
            result.end_terms = {n: int(metric_sum(end_metrics[n], "conclave_election_term")) for n in NAMES}
            result.history = history_in_window(cluster, start_unix_ms)
            check_routes(cluster, result)
        except BenchError as err:
            result.aborted = str(err)
            log(f"  !! {err}")
        # Silences count while the first leader leads: after a new leader, its beats stop.
        tenure_end = min([end] + [origin + at for at, _, _ in result.new_leaders()])
        result.relay_lines.extend(relay_report(cluster, result.first_leader, origin, tenure_end))


def run_group(plans: list[Plan], tmp: Path, ports: PortPool, args: argparse.Namespace, seed: int,
              results: dict[str, RunResult], first_index: int) -> None:
    clusters: list[Cluster] = []
    try:
        for offset, plan in enumerate(plans):
            root = tmp / f"run{first_index + offset}"
            root.mkdir()
            results[plan.label] = RunResult(plan.label, timings_text(plan.binary, args, plan.settings))
            clusters.append(Cluster(plan.label, plan.binary, plan.settings, root, ports, args, seed))
        watchers = bring_up(clusters, results, args)
        idle_window(clusters, results, watchers, args)
    except BenchError as err:
        for plan in plans:
            if plan.label in results and not results[plan.label].aborted:
                results[plan.label].aborted = str(err)
        log(f"  !! {err}")
    finally:
        for cluster in clusters:
            stopped = cluster.stop()
            log(f"  {cluster.label}: stopped {stopped} node(s)")


# --------------------------------------------------------------------------------------------
# report


def report(results: dict[str, RunResult], args: argparse.Namespace) -> int:
    log("\n" + "=" * 100)
    log(f"Spurious elections on a lossy, jittery link: {args.loss * 100:g} % loss, "
        f"{args.delay_ms:g} +- {args.jitter_ms:g} ms one way (uniform), 3 idle nodes, {args.seconds:.0f} s")
    for result in results.values():
        log(f"\n-- {result.label} ({result.timings})")
        if result.aborted:
            log(f"  INCOMPLETE: {result.aborted}")
            continue
        log(f"  first stable leader {result.first_leader} in term {result.start_term}; polls {result.polls} "
            f"({result.unanswered} unanswered) over {result.window_s:.1f} s")
        log(f"  {'node':6} {'pre-votes':>9} {'elections':>9} {'won':>4} {'leader changes':>14} {'leaderless s':>12} "
            f"{'term start':>10} {'term end':>8}")
        for name in NAMES:
            c = result.per_node.get(name, {})
            log(f"  {name:6} {c.get('pre-votes', 0):9.0f} {c.get('elections', 0):9.0f} {c.get('won', 0):4.0f} "
                f"{c.get('leader changes', 0):14.0f} {c.get('leaderless s', 0):12.2f} {result.start_term:10} "
                f"{result.end_terms.get(name, 0):8}")
        window = [ch for ch in result.changes if ch.at >= 0]
        log(f"  changes seen by polling in the window: {len(window)}")
        for ch in window:
            log(f"    +{ch.at:7.2f} s {ch.node}: {ch.before or 'no answer'} -> {ch.after or 'no answer'}")
        for name, entries in result.history.items():
            log(f"  {name}'s /v1/history in the window: {'; '.join(entries) if entries else 'none'}")
        log("  link:")
        for line in result.relay_lines:
            log(f"    {line}")
        if result.route_problems:
            log("  ROUTES: the nodes did not only talk through the relay:")
            for problem in result.route_problems:
                log(f"    {problem}")
        else:
            log("  routes: every node reaches its peers at its relay sockets only")
        log(f"  spurious elections (terms moved after the first stable leader): {result.terms_moved()}; "
            f"new leaders: {len(result.new_leaders())}"
            + "".join(f"; {leader}@{term} at +{at:.1f} s" for at, leader, term in result.new_leaders()))

    log("")
    log(f"{'run':60} {'seconds':>7} {'terms moved':>11} {'new leaders':>11} {'pre-votes':>9} {'elections':>9}")
    for result in results.values():
        if result.aborted:
            log(f"{result.label:60} INCOMPLETE")
            continue
        pre = sum(c["pre-votes"] for c in result.per_node.values())
        elections = sum(c["elections"] for c in result.per_node.values())
        log(f"{result.label:60} {result.window_s:7.0f} {result.terms_moved():11} {len(result.new_leaders()):11} "
            f"{pre:9.0f} {elections:9.0f}")
    log(f"\nload average at the end: {loadavg()}")

    if any(r.aborted or r.route_problems for r in results.values()):
        return 2
    ordered = list(results.values())
    worse = [r.label for r in ordered[1:] if r.terms_moved() > ordered[0].terms_moved()]
    if worse:
        log(f"more spurious elections than {ordered[0].label}: {', '.join(worse)}")
        return 1
    return 0


# --------------------------------------------------------------------------------------------
# setup


def machine_lines(binaries: list[Path]) -> list[str]:
    cpu = cpu_model()
    git = "unknown"
    with contextlib.suppress(BenchError):
        git = run_quiet(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], timeout=15).stdout.strip() or git
    versions = []
    for binary in binaries:
        with contextlib.suppress(BenchError):
            out = run_quiet([str(binary), "--version"], timeout=15).stdout.strip()
            versions.append(f"{binary}: {out or 'unknown'}")
    return [
        f"machine:  nproc {os.cpu_count()}, {cpu}, Linux {platform.release()}, load average {loadavg()}",
        f"versions: {'; '.join(versions)}; this program at git {git}; Python {platform.python_version()}",
    ]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conclave-bin", type=Path, action="append",
                   help="a conclave binary; give it more than once to compare (default: build one)")
    p.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                   help="also run each binary with these settings, beside the plain run")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                   help="a setting for every node of every run, e.g. election.raft.adaptive_timeout=true")
    p.add_argument("--sequential", action="store_true", help="run the binaries and variants one after the other")
    p.add_argument("--seconds", type=float, default=600.0, help="length of the idle window, s (%(default)s)")
    p.add_argument("--loss", type=float, default=0.05, help="probability that a datagram is dropped (%(default)s)")
    p.add_argument("--delay-ms", type=float, default=20.0, help="mean one-way delay, ms (%(default)s)")
    p.add_argument("--jitter-ms", type=float, default=10.0, help="the delay is uniform in delay +- jitter, ms (%(default)s)")
    p.add_argument("--seed", type=int, help="seed of the link's losses and delays (default: random, printed)")
    p.add_argument("--heartbeat-ms", type=int, help="election.raft.heartbeat_ms (default: built in)")
    p.add_argument("--election-min-ms", type=int, help="election.raft.election_timeout_min_ms (default: built in)")
    p.add_argument("--election-max-ms", type=int, help="election.raft.election_timeout_max_ms (default: built in)")
    p.add_argument("--settle", type=float, default=5.0, help="s all three must agree on one leader before the window (%(default)s)")
    p.add_argument("--poll-ms", type=float, default=250.0, help="ms between two looks at each node's status (%(default)s)")
    p.add_argument("--conclave-log", default="info", help="conclave's --log filter; its log goes to a file (%(default)s)")
    p.add_argument("--trace", action="store_true",
                   help="write every datagram's fate to relay.csv in each run's directory (then kept)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (configs, logs) at the end")
    args = p.parse_args(argv)
    if not 0.0 <= args.loss < 1.0:
        p.error("--loss must be in [0, 1)")
    if args.delay_ms < 0 or args.jitter_ms < 0:
        p.error("--delay-ms and --jitter-ms must not be negative")
    if args.seconds <= 0 or args.poll_ms <= 0 or args.settle < 0:
        p.error("--seconds and --poll-ms must be positive, --settle not negative")
    return args


def make_plans(binaries: list[Path], args: argparse.Namespace) -> list[Plan]:
    plans = []
    for binary in binaries:
        plans.append(Plan(str(binary), binary, list(args.settings)))
        for variant in args.variant:
            extra = [item.strip() for item in variant.split(",") if item.strip()]
            plans.append(Plan(f"{binary} {' '.join(extra)}", binary, list(args.settings) + extra))
    labels = [plan.label for plan in plans]
    if len(set(labels)) != len(labels):
        raise BenchError(f"two runs would have the same label: {labels}")
    for plan in plans:
        for item in plan.settings:
            parse_setting(item)
    return plans


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    # Also when started in the background, where a shell leaves SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    binaries = [b.resolve() for b in args.conclave_bin] if args.conclave_bin else [build_conclave()]
    for binary in binaries:
        if not os.access(binary, os.X_OK):
            raise BenchError(f"--conclave-bin {binary} is not an executable file")
    plans = make_plans(binaries, args)

    log("")
    log("Spurious elections on a lossy, jittery link (a user-space relay in place of netem)")
    log("command:  python3 " + " ".join(["bench/lossy_link.py", *argv]))
    for line in machine_lines(binaries):
        log(line)
    log(f"link:     every datagram between two nodes dropped with p = {args.loss:g}, else delivered after "
        f"U[{max(0.0, args.delay_ms - args.jitter_ms):g}, {args.delay_ms + args.jitter_ms:g}] ms; seed {seed}")
    log(f"runs:     {', '.join(p.label for p in plans)} ({'one after the other' if args.sequential else 'at the same time'})")

    tmp = Path(tempfile.mkdtemp(prefix="conclave-lossy-"))
    args.keep = args.keep or args.trace
    results: dict[str, RunResult] = {}
    code = 2
    try:
        ports = PortPool()
        groups = [[plan] for plan in plans] if args.sequential else [plans]
        index = 0
        for group in groups:
            run_group(group, tmp, ports, args, seed, results, index)
            index += len(group)
        code = report(results, args)
        return code
    finally:
        if args.keep or code == 2:
            log(f"temporary directory kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted; every node was stopped", file=sys.stderr)
        sys.exit(130)
