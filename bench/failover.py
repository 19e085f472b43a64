#!/usr/bin/env python3
"""Failover after kill -9 of the leader: conclave against etcd, on one machine, in one run.

docs/design.md §11 (the failover row): three nodes on loopback, heartbeat 50 ms, election timeout
250 ms; measure the time from `kill -9` of the leader until every survivor names the same new
leader. conclave's target is a median at most 0.8 x etcd's median and a p99 at most etcd's
median + 100 ms, both measured in the same run. Issue 27 asks more: a median at most 0.6 x
etcd's at those timings (`--timings tight`, the default), and at most 0.5 x etcd's with each
system at its own default timings (`--timings defaults`).

What the program does:

1. installs etcd (Debian `etcd-server`, `etcd-client`) when `etcd` or `etcdctl` is missing,
   and builds conclave in release mode unless `--conclave-bin` is given;
2. for each system in turn: generates the configuration of three members into a temporary
   directory (free loopback ports, data directories there), starts them, waits until all
   three name one leader, then measures one idle member's CPU and RSS for `--idle-seconds`;
3. runs `--rounds` failovers: wait until all three agree on one leader for `--settle`
   seconds, kill -9 the leader at a random moment, poll both survivors' own view of the
   leader over HTTP every `--poll-ms` until they name the same new leader, restart the killed
   member from its data directory and wait until it has rejoined;
4. prints the distribution of the failover times for both systems, the ratios, the idle
   figures and the §11 target check (PASS / FAIL).

Every member runs in its own process group and is killed on the way out, also on Ctrl-C,
SIGTERM or an error; with PR_SET_PDEATHSIG the members die even if this program is killed.

Standard library only (Python 3.11). Run from anywhere: `python3 bench/failover.py`.
Exit code: 0 when both targets pass, 1 when one is missed, 2 on an error or an incomplete run.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import platform
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import (
    BenchError, PortPool, build_conclave, clean_env, cpu_model, die_with_parent, loadavg, log, run_quiet, stop_members,
)

REPO = Path(__file__).resolve().parent.parent

# docs/design.md §11: the same timing for both systems. etcd draws its election timeout in [et, 2 et),
# so --election-timeout 250 is conclave's [250, 500).
HEARTBEAT_MS = 50
ELECTION_MIN_MS = 250
ELECTION_MAX_MS = 500


@dataclass(frozen=True)
class Timings:
    """What both systems are told about time (`--timings`), and the targets of that setting."""

    name: str
    # conclave's [election.raft] timing keys, and etcd's flags; empty: each one's defaults.
    conclave_keys: str
    etcd_flags: tuple[str, ...]
    description: str
    # Issue 27: conclave's median at most this times etcd's, in the same run.
    issue27_ratio: float
    # docs/design.md §11's failover row applies to the tight setting only.
    design_row: bool


TIMINGS = {
    "tight": Timings(
        "tight",
        f"heartbeat_ms = {HEARTBEAT_MS}\nelection_timeout_min_ms = {ELECTION_MIN_MS}\n"
        f"election_timeout_max_ms = {ELECTION_MAX_MS}\n",
        ("--heartbeat-interval", str(HEARTBEAT_MS), "--election-timeout", str(ELECTION_MIN_MS)),
        f"heartbeat {HEARTBEAT_MS} ms, election timeout {ELECTION_MIN_MS}-{ELECTION_MAX_MS} ms "
        f"(etcd: --heartbeat-interval {HEARTBEAT_MS} --election-timeout {ELECTION_MIN_MS}: {ELECTION_MIN_MS // HEARTBEAT_MS}"
        f"-{2 * ELECTION_MIN_MS // HEARTBEAT_MS - 1} ticks of {HEARTBEAT_MS} ms, counted from the first tick after "
        f"the last heartbeat, so {ELECTION_MIN_MS - HEARTBEAT_MS}-{2 * ELECTION_MIN_MS - HEARTBEAT_MS} ms after it)",
        0.6,
        True,
    ),
    "defaults": Timings(
        "defaults",
        "",
        (),
        "each system at its own defaults (conclave: no timing key set; etcd: no timing flag, "
        "heartbeat 100 ms, election timeout 1000 ms, drawn in [1000, 2000) ms)",
        0.5,
        False,
    ),
}

# Timeouts of one HTTP request to a member, and of the phases of a round.
HTTP_TIMEOUT_S = 0.25
START_TIMEOUT_S = 30.0
STOP_GRACE_S = 3.0


# --------------------------------------------------------------------------------------------
# ports


def check_port_free(port: int, kind: int, what: str) -> None:
    """Raises a clear error when another process holds `port` on loopback."""
    with socket.socket(socket.AF_INET, kind) as sock:
        if kind == socket.SOCK_STREAM:
            # The servers set SO_REUSEADDR too, so a TIME_WAIT left by a killed member does not
            # count as taken; a listener does.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as err:
            proto = "tcp" if kind == socket.SOCK_STREAM else "udp"
            raise BenchError(
                f"port 127.0.0.1:{port}/{proto} ({what}) is taken by another process: {err}"
            ) from err


# --------------------------------------------------------------------------------------------
# HTTP views of a member


class HttpProbe:
    """One keep-alive HTTP connection to a member; the same client code for both systems."""

    def __init__(self, port: int, method: str, path: str, body: bytes | None) -> None:
        self.port = port
        self.method = method
        self.path = path
        self.body = body
        self.conn: http.client.HTTPConnection | None = None

    def fetch(self) -> dict | None:
        """The decoded JSON answer, or None when the member did not answer in time."""
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=HTTP_TIMEOUT_S)
            headers = {"Content-Type": "application/json"} if self.body is not None else {}
            self.conn.request(self.method, self.path, body=self.body, headers=headers)
            response = self.conn.getresponse()
            data = response.read()
            if response.status != 200:
                return None
            return json.loads(data)
        except (OSError, http.client.HTTPException, ValueError):
            self.close()
            return None

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None


@dataclass(frozen=True)
class View:
    """What one member says about the leader: its name (None: no leader known) and term."""

    leader: str | None
    term: int

    def __str__(self) -> str:
        return f"{self.leader or '-'}@{self.term}"


# --------------------------------------------------------------------------------------------
# processes


@dataclass
class Member:
    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    ports: list[tuple[int, int, str]]  # (port, SOCK_*, what)
    probe_port: int
    proc: subprocess.Popen | None = None
    log_file: object | None = None
    starts: int = 0

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "    (no log)"
        return "\n".join("    " + line for line in text[-lines:]) or "    (log is empty)"


class Cluster:
    """Three members of one system; subclasses say how to configure and ask them."""

    system = "?"
    # Whether the term in a member's answer is its current Raft term. etcd's `raftTerm` is the
    # term of the last entry it applied, which trails the election: a follower names the new
    # leader a commit round trip (up to a heartbeat or more) before its `raftTerm` moves on.
    term_is_current = True

    def __init__(self, root: Path, ports: PortPool) -> None:
        self.root = root
        self.ports = ports
        self.members: dict[str, Member] = {}

    # --- to be provided by each system

    def make_probe(self, member: Member) -> HttpProbe:
        raise NotImplementedError

    def parse_view(self, member: Member, answer: dict) -> View:
        raise NotImplementedError

    def after_start(self) -> None:
        """Called once all three members answer for the first time."""

    # --- process control

    def start(self, name: str) -> None:
        member = self.members[name]
        if member.alive():
            raise BenchError(f"{self.system} {name} is already running")
        for port, kind, what in member.ports:
            check_port_free(port, kind, f"{what} of {self.system} {name}")
        if member.log_file is not None:
            member.log_file.close()
        member.log_file = open(member.log_path, "ab")
        member.log_file.write(f"\n===== start {member.starts + 1} at monotonic {time.monotonic():.3f}\n".encode())
        member.log_file.flush()
        try:
            member.proc = subprocess.Popen(
                member.argv,
                cwd=self.root,
                env=member.env,
                stdin=subprocess.DEVNULL,
                stdout=member.log_file,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        except OSError as err:
            raise BenchError(f"cannot start {self.system} {name} ({member.argv[0]}): {err}") from err
        member.starts += 1

    def wait_answering(self, names: list[str], timeout: float) -> None:
        """Waits until each member answers its status request; fails fast if one dies."""
        probes = {name: self.make_probe(self.members[name]) for name in names}
        deadline = time.monotonic() + timeout
        waiting = set(names)
        try:
            while waiting:
                for name in sorted(waiting):
                    self.require_alive([name], "while starting")
                    if probes[name].fetch() is not None:
                        waiting.discard(name)
                if not waiting:
                    break
                if time.monotonic() > deadline:
                    details = "\n".join(
                        f"  {name}: no answer on 127.0.0.1:{self.members[name].probe_port}; log:\n"
                        f"{self.members[name].log_tail()}"
                        for name in sorted(waiting)
                    )
                    raise BenchError(f"{self.system}: members did not answer within {timeout:.0f} s:\n{details}")
                time.sleep(0.05)
        finally:
            for probe in probes.values():
                probe.close()

    def require_alive(self, names: list[str], context: str) -> None:
        for name in names:
            member = self.members[name]
            if not member.alive():
                code = member.proc.returncode if member.proc is not None else None
                raise BenchError(
                    f"{self.system} {name} exited {context} (exit code {code}); last lines of "
                    f"{member.log_path}:\n{member.log_tail()}"
                )

    def kill9(self, name: str) -> None:
        member = self.members[name]
        assert member.proc is not None
        os.kill(member.proc.pid, signal.SIGKILL)

    def reap(self, name: str, timeout: float = 5.0) -> None:
        member = self.members[name]
        if member.proc is None:
            return
        try:
            member.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as err:
            raise BenchError(f"{self.system} {name} (pid {member.proc.pid}) did not die after SIGKILL") from err

    def stop_all(self) -> int:
        """Stops every member and reaps it; returns how many were still running."""
        return stop_members(self.members.values(), STOP_GRACE_S)

    # --- views

    def views(self, probes: dict[str, HttpProbe]) -> dict[str, View | None]:
        out = {}
        for name, probe in probes.items():
            answer = probe.fetch()
            out[name] = None if answer is None else self.parse_view(self.members[name], answer)
        return out

    def wait_stable(self, settle: float, timeout: float, context: str) -> tuple[str, int, float]:
        """Waits until all members name one leader in one term, unchanged for `settle` s.

        Returns the leader, its term and when, counted from the call, the three first agreed on
        it (the agreement then held for `settle` seconds)."""
        names = sorted(self.members)
        probes = {name: self.make_probe(self.members[name]) for name in names}
        start = time.monotonic()
        deadline = start + timeout
        agreed: tuple[str, int] | None = None
        agreed_since = 0.0
        last: dict[str, View | None] = {}
        try:
            while True:
                self.require_alive(names, context)
                last = self.views(probes)
                now = time.monotonic()
                seen = set(last.values())
                current = None
                if len(seen) == 1 and None not in seen:
                    (view,) = seen
                    if view.leader is not None:
                        current = (view.leader, view.term)
                if current != agreed:
                    agreed, agreed_since = current, now
                if agreed is not None and now - agreed_since >= settle:
                    return agreed[0], agreed[1], agreed_since - start
                if now > deadline:
                    shown = ", ".join(f"{n}: {last.get(n) or 'no answer'}" for n in names)
                    raise BenchError(
                        f"{self.system}: no leader agreed on by all three members for {settle:.1f} s "
                        f"within {timeout:.0f} s {context}; last views: {shown}"
                    )
                time.sleep(0.02)
        finally:
            for probe in probes.values():
                probe.close()


class ConclaveCluster(Cluster):
    system = "conclave"

    def __init__(self, root: Path, ports: PortPool, binary: Path, log_filter: str, timings: Timings) -> None:
        super().__init__(root, ports)
        names = ["gw-a", "gw-b", "gw-c"]
        udp = {n: ports.take(socket.SOCK_DGRAM) for n in names}
        admin = {n: ports.take() for n in names}
        metrics = {n: ports.take() for n in names}
        psk = root / "psk"
        psk.write_text(secrets.token_hex(32) + "\n")
        env = clean_env(("CONCLAVE__", "CONCLAVE_", "RUST_LOG"))
        for name in names:
            config = root / f"{name}.toml"
            q = json.dumps  # a JSON string is a valid TOML basic string
            peers = ", ".join(q(f"127.0.0.1:{udp[p]}") for p in names if p != name)
            config.write_text(
                f"""# generated by bench/failover.py
[node]
id = {q(name)}
data_dir = {q(str(root / "data" / name))}

[cluster]
id = "failover-bench"
voters = [{", ".join(q(n) for n in names)}]
psk_file = {q(str(psk))}

[election]
mode = "raft"
auto = true

[election.raft]
quorum = "voters"
{timings.conclave_keys}
[link.udp]
listen = {q(f"127.0.0.1:{udp[name]}")}
peers = [{peers}]

[admin]
listen = {q(f"127.0.0.1:{admin[name]}")}

[metrics]
listen = {q(f"127.0.0.1:{metrics[name]}")}
"""
            )
            check = run_quiet([str(binary), "check-config", str(config)], timeout=30, env=env)
            if check.returncode != 0:
                raise BenchError(
                    f"conclave check-config {config} failed (exit {check.returncode}):\n{check.stdout}{check.stderr}"
                )
            self.members[name] = Member(
                name=name,
                argv=[str(binary), "run", "--config", str(config), "--log", log_filter],
                env=env,
                log_path=root / f"{name}.log",
                ports=[
                    (udp[name], socket.SOCK_DGRAM, "udp.listen"),
                    (admin[name], socket.SOCK_STREAM, "admin.listen"),
                    (metrics[name], socket.SOCK_STREAM, "metrics.listen"),
                ],
                probe_port=admin[name],
            )

    def make_probe(self, member: Member) -> HttpProbe:
        return HttpProbe(member.probe_port, "GET", "/v1/status", None)

    def parse_view(self, member: Member, answer: dict) -> View:
        return View(answer.get("leader"), int(answer.get("term", 0)))


class EtcdCluster(Cluster):
    system = "etcd"
    term_is_current = False

    def __init__(self, root: Path, ports: PortPool, etcd: str, etcdctl: str, log_level: str, timings: Timings) -> None:
        super().__init__(root, ports)
        self.etcdctl = etcdctl
        names = ["etcd-a", "etcd-b", "etcd-c"]
        peer = {n: ports.take() for n in names}
        client = {n: ports.take() for n in names}
        initial = ",".join(f"{n}=http://127.0.0.1:{peer[n]}" for n in names)
        token = "failover-bench-" + secrets.token_hex(4)
        self.env = clean_env(("ETCD_", "ETCDCTL_"))
        self.env["ETCDCTL_API"] = "3"
        self.id_to_name: dict[int, str] = {}
        for name in names:
            self.members[name] = Member(
                name=name,
                argv=[
                    etcd,
                    "--name", name,
                    "--data-dir", str(root / "data" / name),
                    "--listen-peer-urls", f"http://127.0.0.1:{peer[name]}",
                    "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer[name]}",
                    "--listen-client-urls", f"http://127.0.0.1:{client[name]}",
                    "--advertise-client-urls", f"http://127.0.0.1:{client[name]}",
                    "--initial-cluster", initial,
                    "--initial-cluster-state", "new",
                    "--initial-cluster-token", token,
                    *timings.etcd_flags,
                    "--logger", "zap",
                    "--log-level", log_level,
                ],
                env=self.env,
                log_path=root / f"{name}.log",
                ports=[
                    (peer[name], socket.SOCK_STREAM, "peer URL"),
                    (client[name], socket.SOCK_STREAM, "client URL"),
                ],
                probe_port=client[name],
            )

    def make_probe(self, member: Member) -> HttpProbe:
        # etcd 3.4 serves the v3 gRPC gateway on the client URL; the v2 API is off by default
        # (404). uint64 fields come as JSON strings, and a zero `leader` is left out.
        return HttpProbe(member.probe_port, "POST", "/v3/maintenance/status", b"{}")

    def parse_view(self, member: Member, answer: dict) -> View:
        leader_id = int(answer.get("leader", "0") or 0)
        term = int(answer.get("raftTerm", answer.get("header", {}).get("raft_term", 0)) or 0)
        if leader_id == 0:
            return View(None, term)
        return View(self.id_to_name.get(leader_id, f"id:{leader_id:x}"), term)

    def endpoints(self) -> str:
        return ",".join(f"http://127.0.0.1:{m.probe_port}" for m in self.members.values())

    def after_start(self) -> None:
        # Member ids to names, once, with etcdctl; and a cross-check that etcdctl's
        # `endpoint status` and the HTTP gateway polled below report the same leader.
        listing = run_quiet(
            [self.etcdctl, "--endpoints", self.endpoints(), "--command-timeout=5s", "member", "list", "--write-out=json"],
            timeout=15, env=self.env,
        )
        if listing.returncode != 0:
            raise BenchError(f"etcdctl member list failed:\n{listing.stdout}{listing.stderr}")
        for entry in json.loads(listing.stdout).get("members", []):
            self.id_to_name[int(entry["ID"])] = entry["name"]
        if sorted(self.id_to_name.values()) != sorted(self.members):
            raise BenchError(f"etcdctl member list names {sorted(self.id_to_name.values())}, expected {sorted(self.members)}")
        status = run_quiet(
            [self.etcdctl, "--endpoints", self.endpoints(), "--command-timeout=5s", "endpoint", "status", "--write-out=json"],
            timeout=15, env=self.env,
        )
        if status.returncode != 0:
            raise BenchError(f"etcdctl endpoint status failed:\n{status.stdout}{status.stderr}")
        ctl_leaders = {self.id_to_name.get(int(e["Status"]["leader"])) for e in json.loads(status.stdout)}
        probes = {n: self.make_probe(m) for n, m in self.members.items()}
        try:
            http_leaders = {v.leader for v in self.views(probes).values() if v is not None}
        finally:
            for probe in probes.values():
                probe.close()
        log(f"  etcdctl endpoint status: leader {sorted(map(str, ctl_leaders))}; "
            f"HTTP /v3/maintenance/status: leader {sorted(map(str, http_leaders))}")


# --------------------------------------------------------------------------------------------
# one failover


@dataclass
class Observation:
    at: float  # time.monotonic() when the answer arrived
    view: View | None
    latency: float


class SurvivorPoller(threading.Thread):
    """Polls one survivor's own view of the leader as fast as `interval` allows."""

    def __init__(self, cluster: Cluster, name: str, interval: float, changed: threading.Event) -> None:
        super().__init__(name=f"poll-{name}", daemon=True)
        self.cluster = cluster
        self.member = cluster.members[name]
        self.probe = cluster.make_probe(self.member)
        self.interval = interval
        self.changed = changed
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.observations: list[Observation] = []

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                sent = time.monotonic()
                answer = self.probe.fetch()
                arrived = time.monotonic()
                view = None if answer is None else self.cluster.parse_view(self.member, answer)
                with self.lock:
                    self.observations.append(Observation(arrived, view, arrived - sent))
                self.changed.set()
                self.stop.wait(self.interval)
        finally:
            self.probe.close()

    def snapshot(self) -> list[Observation]:
        with self.lock:
            return list(self.observations)


@dataclass
class RoundResult:
    index: int
    killed: str
    old_term: int
    delay_s: float
    failover_ms: float | None = None  # None: no agreement before the cap
    new_leader: str | None = None
    new_term: int | None = None
    per_survivor_ms: dict[str, float] = field(default_factory=dict)
    transitions: dict[str, list[str]] = field(default_factory=dict)
    polls: int = 0
    poll_latency_ms: float = 0.0
    gap_ms: float = 0.0  # between the last survivor's answer before the agreement and the first after
    rejoin_s: float | None = None
    leader_after_rejoin: str | None = None
    note: str = ""


def transitions_of(observations: list[Observation], t0: float) -> list[str]:
    """`view@ms` for each change of a survivor's view after the kill."""
    out: list[str] = []
    last: object = object()
    for obs in observations:
        if obs.at < t0:
            continue
        if obs.view != last:
            out.append(f"{obs.view or 'no answer'}@{(obs.at - t0) * 1000:.0f}ms")
            last = obs.view
    return out


def one_failover(cluster: Cluster, index: int, args: argparse.Namespace, rng: random.Random) -> RoundResult:
    leader, term, _ = cluster.wait_stable(args.settle, args.stable_timeout, f"before round {index}")
    survivors = sorted(n for n in cluster.members if n != leader)
    changed = threading.Event()
    pollers = [SurvivorPoller(cluster, name, args.poll_ms / 1000.0, changed) for name in survivors]
    for poller in pollers:
        poller.start()
    delay = rng.uniform(0.0, args.max_kill_delay)
    result = RoundResult(index=index, killed=leader, old_term=term, delay_s=delay)
    try:
        # Warm connections and a random phase against the leader's heartbeat.
        time.sleep(delay)
        cluster.require_alive(list(cluster.members), f"before the kill of round {index}")
        t0 = time.monotonic()
        cluster.kill9(leader)
        deadline = t0 + args.failover_cap
        while True:
            changed.wait(0.05)
            changed.clear()
            agreed = agreement(pollers, t0, leader, term, cluster.term_is_current)
            if agreed is not None:
                at, new_leader, new_term, firsts, gap = agreed
                result.gap_ms = gap * 1000.0
                result.failover_ms = (at - t0) * 1000.0
                result.new_leader, result.new_term = new_leader, new_term
                result.per_survivor_ms = {n: (t - t0) * 1000.0 for n, t in firsts.items()}
                break
            if time.monotonic() > deadline:
                break
            cluster.require_alive(survivors, f"during the failover of round {index}")
    finally:
        for poller in pollers:
            poller.stop.set()
        for poller in pollers:
            poller.join(timeout=2.0)
    cluster.reap(leader)
    all_obs = []
    for poller in pollers:
        obs = poller.snapshot()
        result.transitions[poller.member.name] = transitions_of(obs, t0)
        all_obs.extend(o for o in obs if o.at >= t0)
    result.polls = len(all_obs)
    if all_obs:
        result.poll_latency_ms = 1000.0 * sum(o.latency for o in all_obs) / len(all_obs)
    return result


def agreement(pollers: list[SurvivorPoller], t0: float, killed: str, old_term: int, check_term: bool):
    """When every survivor's latest view names the same leader, not the killed one (and, where
    the answer carries the current Raft term, in one term after `old_term`): the time the last
    of them was first seen so, the leader, the term and when each survivor first showed it."""
    latest: dict[str, Observation] = {}
    histories: dict[str, list[Observation]] = {}
    for poller in pollers:
        obs = [o for o in poller.snapshot() if o.at >= t0]
        if not obs or obs[-1].view is None:
            return None
        latest[poller.member.name] = obs[-1]
        histories[poller.member.name] = obs
    def same(a: View | None, b: View) -> bool:
        if a is None or a.leader != b.leader:
            return False
        return a.term == b.term if check_term else True

    view = next(iter(latest.values())).view
    if view.leader is None or view.leader == killed:
        return None
    if not all(same(o.view, view) for o in latest.values()):
        return None
    if check_term and view.term <= old_term:
        return None
    # The first observation of the unbroken run of this view, for each survivor, and the
    # answer before it: the change happened between the two.
    firsts: dict[str, float] = {}
    befores: dict[str, float] = {}
    for name, obs in histories.items():
        first, before = obs[-1].at, t0
        for i in range(len(obs) - 1, -1, -1):
            if not same(obs[i].view, view):
                before = obs[i].at
                break
            first = obs[i].at
        firsts[name], befores[name] = first, before
    term = max(o.view.term for o in latest.values())
    last = max(firsts, key=firsts.get)
    return firsts[last], view.leader, term, firsts, firsts[last] - befores[last]


def rejoin(cluster: Cluster, result: RoundResult, args: argparse.Namespace) -> None:
    start = time.monotonic()
    cluster.start(result.killed)
    cluster.wait_answering([result.killed], START_TIMEOUT_S)
    answering = time.monotonic() - start
    leader, _term, agreed = cluster.wait_stable(
        args.settle, args.rejoin_timeout, f"after restarting {result.killed} in round {result.index}"
    )
    result.rejoin_s = answering + agreed
    result.leader_after_rejoin = leader
    if result.new_leader is not None and leader != result.new_leader:
        result.note = f"leader changed from {result.new_leader} to {leader} while {result.killed} rejoined"


# --------------------------------------------------------------------------------------------
# idle CPU and memory


def proc_cpu_ticks(pid: int) -> int:
    text = Path(f"/proc/{pid}/stat").read_text()
    # The command name may hold spaces: the fields after it start past the last ')'.
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))


def proc_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class IdleFigure:
    name: str
    role: str
    cpu_percent: float
    rss_mib: float


def measure_idle(cluster: Cluster, leader: str, seconds: float) -> list[IdleFigure]:
    """CPU (% of one core) and RSS of every member while nothing happens and nobody polls."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = {name: m.proc.pid for name, m in cluster.members.items()}
    before = {name: proc_cpu_ticks(pid) for name, pid in pids.items()}
    t_start = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t_start
    cluster.require_alive(list(cluster.members), "during the idle measurement")
    figures = []
    for name, pid in sorted(pids.items()):
        used = (proc_cpu_ticks(pid) - before[name]) / tick
        figures.append(
            IdleFigure(
                name=name,
                role="leader" if name == leader else "follower",
                cpu_percent=100.0 * used / elapsed,
                rss_mib=proc_rss_kib(pid) / 1024.0,
            )
        )
    return figures


# --------------------------------------------------------------------------------------------
# one system


@dataclass
class SystemResult:
    system: str
    version: str
    rounds: list[RoundResult] = field(default_factory=list)
    idle: list[IdleFigure] = field(default_factory=list)
    aborted: str = ""

    def times(self) -> list[float]:
        """Failover times in ms; a round with no agreement before the cap counts as +inf."""
        return [r.failover_ms if r.failover_ms is not None else math.inf for r in self.rounds]


def run_system(cluster: Cluster, result: SystemResult, args: argparse.Namespace, rng: random.Random) -> None:
    log(f"\n== {cluster.system}: starting 3 members in {cluster.root} (load average {loadavg()})")
    started = time.monotonic()
    for name in sorted(cluster.members):
        cluster.start(name)
    # etcd answers its clients only once it has a leader, so the time to agreement is counted
    # from the start, not from the first answer.
    cluster.wait_answering(sorted(cluster.members), START_TIMEOUT_S)
    answering = time.monotonic() - started
    _, _, agreed = cluster.wait_stable(args.settle, args.stable_timeout, "after the first start")
    cluster.after_start()
    leader, term, _ = cluster.wait_stable(args.settle, args.stable_timeout, "after the first start")
    log(f"  first leader {leader} (term {term}): all three named it {answering + agreed:.2f} s after the start")

    if args.idle_seconds > 0:
        leader, term, _ = cluster.wait_stable(args.settle, args.stable_timeout, "before the idle measurement")
        log(f"  idle measurement: {args.idle_seconds:.0f} s, no failure, no polling")
        result.idle = measure_idle(cluster, leader, args.idle_seconds)
        for fig in result.idle:
            log(f"    {fig.name:7} {fig.role:8} CPU {fig.cpu_percent:5.2f} % of one core   RSS {fig.rss_mib:6.1f} MiB")

    for index in range(1, args.rounds + 1):
        r = one_failover(cluster, index, args, rng)
        result.rounds.append(r)
        if r.failover_ms is None:
            log(
                f"  round {index:2}/{args.rounds}: killed {r.killed} (term {r.old_term}) after {r.delay_s * 1000:.0f} ms; "
                f"NO AGREED NEW LEADER within {args.failover_cap:.0f} s; survivors' views after the kill: "
                + "; ".join(f"{n}: {' -> '.join(t) or 'none'}" for n, t in r.transitions.items())
            )
        else:
            each = ", ".join(f"{n} {ms:.0f}" for n, ms in sorted(r.per_survivor_ms.items()))
            log(
                f"  round {index:2}/{args.rounds}: killed {r.killed} (term {r.old_term}) after {r.delay_s * 1000:3.0f} ms; "
                f"{r.new_leader}{f' term {r.new_term}' if cluster.term_is_current else ''} known by all survivors in {r.failover_ms:7.1f} ms "
                f"({each}; {r.polls} polls of {r.poll_latency_ms:.1f} ms, last gap {r.gap_ms:.1f} ms)"
            )
            if args.verbose:
                for n, t in r.transitions.items():
                    log(f"      {n}: {' -> '.join(t)}")
        try:
            rejoin(cluster, r, args)
        except BenchError as err:
            result.aborted = f"round {index}: {r.killed} did not rejoin: {err}"
            log(f"  !! {result.aborted}")
            log(f"     last lines of {cluster.members[r.killed].log_path}:\n{cluster.members[r.killed].log_tail()}")
            return
        log(f"      {r.killed} restarted; all three named {r.leader_after_rejoin} {r.rejoin_s:.2f} s after the restart"
            + (f"  NOTE: {r.note}" if r.note else ""))


# --------------------------------------------------------------------------------------------
# statistics and report


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def fmt_ms(value: float, cap_s: float) -> str:
    if math.isinf(value):
        return f"> {cap_s * 1000:.0f}"
    return f"{value:.1f}"


def summarize(values: list[float]) -> dict[str, float]:
    return {
        "min": min(values),
        "median": nearest_rank(values, 0.5),
        "p90": nearest_rank(values, 0.9),
        "p99": nearest_rank(values, 0.99),
        "max": max(values),
        "mean": sum(values) / len(values) if all(math.isfinite(v) for v in values) else math.inf,
    }


def report(results: dict[str, SystemResult], args: argparse.Namespace) -> int:
    log("\n" + "=" * 100)
    log("Failover after kill -9 of the leader: time until all survivors name the same new leader (ms)")
    timings = TIMINGS[args.timings]
    log(f"3 members on loopback, {timings.description}")
    log(f"survivors polled over HTTP every {args.poll_ms:g} ms; percentiles nearest-rank "
        f"(with {args.rounds} rounds p99 is the largest value); cap {args.failover_cap:.0f} s")
    log("")
    header = f"{'system':10} {'version':>9} {'rounds':>6} {'min':>9} {'median':>9} {'mean':>9} {'p90':>9} {'p99':>9} {'max':>9} {'no leader':>9}"
    log(header)
    stats: dict[str, dict[str, float]] = {}
    for system, res in results.items():
        values = res.times()
        if not values:
            log(f"{system:10} {res.version:>9} {0:6}  (no completed round)")
            continue
        s = summarize(values)
        stats[system] = s
        failed = sum(1 for v in values if math.isinf(v))
        log(
            f"{system:10} {res.version:>9} {len(values):6} "
            + " ".join(f"{fmt_ms(s[k], args.failover_cap):>9}" for k in ("min", "median", "mean", "p90", "p99", "max"))
            + f" {failed:9}"
        )
    for system, res in results.items():
        done = [r for r in res.rounds if r.failover_ms is not None]
        if done:
            latency = sum(r.poll_latency_ms * r.polls for r in res.rounds) / max(1, sum(r.polls for r in res.rounds))
            gaps = sorted(r.gap_ms for r in done)
            log(f"{system}: one poll answer took {latency:.1f} ms on average; gap between the answers around the "
                f"agreement (measurement resolution): median {nearest_rank(gaps, 0.5):.1f} ms, max {gaps[-1]:.1f} ms")
    for system, res in results.items():
        if res.aborted:
            log(f"{system}: INCOMPLETE, {res.aborted}")
        for r in res.rounds:
            if r.note:
                log(f"{system} round {r.index}: {r.note}")

    exit_code = 0
    if "conclave" in stats and "etcd" in stats:
        c, e = stats["conclave"], stats["etcd"]
        log("")

        def ratio(a: float, b: float) -> str:
            return "n/a" if math.isinf(a) or math.isinf(b) or b == 0 else f"{a / b:.2f}"

        log(f"ratio conclave/etcd: median {ratio(c['median'], e['median'])}, p99 {ratio(c['p99'], e['p99'])}")
        log("")
        ok1 = ok2 = True
        if timings.design_row:
            log("docs/design.md §11 target (failover row), measured in this run:")
            bound1 = 0.8 * e["median"]
            ok1 = c["median"] <= bound1
            log(f"  conclave median {fmt_ms(c['median'], args.failover_cap)} ms <= 0.8 x etcd median "
                f"{fmt_ms(e['median'], args.failover_cap)} ms = {fmt_ms(bound1, args.failover_cap)} ms: {'PASS' if ok1 else 'FAIL'}")
            bound2 = e["median"] + 100.0
            ok2 = c["p99"] <= bound2
            log(f"  conclave p99 {fmt_ms(c['p99'], args.failover_cap)} ms <= etcd median + 100 ms "
                f"= {fmt_ms(bound2, args.failover_cap)} ms: {'PASS' if ok2 else 'FAIL'}")
        log(f"issue 27 target ({timings.name} timings), measured in this run:")
        bound3 = timings.issue27_ratio * e["median"]
        ok3 = c["median"] <= bound3
        log(f"  conclave median {fmt_ms(c['median'], args.failover_cap)} ms <= {timings.issue27_ratio} x etcd median "
            f"{fmt_ms(e['median'], args.failover_cap)} ms = {fmt_ms(bound3, args.failover_cap)} ms: {'PASS' if ok3 else 'FAIL'}")
        ok1 = ok1 and ok3
        incomplete = [s for s, r in results.items() if r.aborted or len(r.rounds) < args.rounds]
        if incomplete:
            log(f"  (not a valid comparison: {', '.join(incomplete)} did not complete all {args.rounds} rounds)")
        if not (ok1 and ok2) or incomplete:
            exit_code = 1

    if any(r.idle for r in results.values()):
        log("")
        log(f"One idle member, cluster up, no failure, no polling, {args.idle_seconds:.0f} s "
            "(CPU from /proc/<pid>/stat utime+stime, RSS from /proc/<pid>/status VmRSS):")
        log(f"{'system':10} {'member':8} {'role':8} {'CPU % of one core':>18} {'RSS MiB':>8}")
        for system, res in results.items():
            for fig in res.idle:
                log(f"{system:10} {fig.name:8} {fig.role:8} {fig.cpu_percent:18.2f} {fig.rss_mib:8.1f}")
        tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
        log(f"(resolution: one clock tick = {tick_ms:.0f} ms, i.e. {100 * tick_ms / 1000 / args.idle_seconds:.2f} % over "
            f"{args.idle_seconds:.0f} s; these are 3 nodes at the {timings.name} timings, not the 5-peer default-timing "
            "setup of the §11 idle row)")
    return exit_code


# --------------------------------------------------------------------------------------------
# setup: etcd, conclave, machine


def ensure_etcd() -> tuple[str, str]:
    etcd, etcdctl = shutil.which("etcd"), shutil.which("etcdctl")
    if etcd and etcdctl:
        return etcd, etcdctl
    if os.geteuid() != 0:
        raise BenchError("etcd or etcdctl is missing and this is not root: install the Debian packages "
                         "etcd-server and etcd-client, or run as root")
    log("etcd missing: apt-get update && apt-get install -y --no-install-recommends etcd-server etcd-client")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update"],
                 ["apt-get", "install", "-y", "--no-install-recommends", "etcd-server", "etcd-client"]):
        try:
            done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired as err:
            raise BenchError(f"{' '.join(argv)} took more than 15 minutes") from err
        if done.returncode != 0:
            raise BenchError(f"{' '.join(argv)} failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    etcd, etcdctl = shutil.which("etcd"), shutil.which("etcdctl")
    if not (etcd and etcdctl):
        raise BenchError("etcd-server / etcd-client installed but `etcd` or `etcdctl` is still not on PATH")
    return etcd, etcdctl


def etcd_version(etcd: str) -> str:
    out = run_quiet([etcd, "--version"], timeout=15).stdout
    match = re.search(r"etcd Version:\s*(\S+)", out)
    return match.group(1) if match else "unknown"


def conclave_version(binary: Path) -> str:
    out = run_quiet([str(binary), "--version"], timeout=15).stdout.split()
    return out[-1] if out else "unknown"


def machine_lines(etcd_ver: str, conclave_bin: Path) -> list[str]:
    cpu = cpu_model()
    rustc = "unknown"
    with contextlib.suppress(BenchError):
        done = run_quiet(["rustc", "--version"], timeout=15)
        rustc = done.stdout.strip() or rustc
    git = "unknown"
    with contextlib.suppress(BenchError):
        done = run_quiet(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], timeout=15)
        git = done.stdout.strip() or git
    return [
        f"machine:  nproc {os.cpu_count()}, {cpu}, Linux {platform.release()}",
        f"versions: etcd {etcd_ver}, {rustc}, conclave {conclave_bin} (git {git}), Python {platform.python_version()}",
    ]


# --------------------------------------------------------------------------------------------
# main


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rounds", type=int, default=30, help="failovers per system")
    p.add_argument("--timings", choices=sorted(TIMINGS), default="tight",
                   help="tight: heartbeat 50 ms, election timeout 250-500 ms for both (docs/design.md §11); "
                        "defaults: each system at its own default timings")
    p.add_argument("--conclave-bin", type=Path, help="use this conclave binary instead of building one")
    p.add_argument("--systems", default="conclave,etcd", help="which systems, in this order")
    p.add_argument("--settle", type=float, default=1.0, help="s all three must agree on one leader before a kill")
    p.add_argument("--max-kill-delay", type=float, default=0.5,
                   help="after settling, the kill comes after a random delay in [0, this) s")
    p.add_argument("--poll-ms", type=float, default=5.0, help="pause between two polls of one survivor")
    p.add_argument("--failover-cap", type=float, default=10.0, help="s after the kill before a round counts as failed")
    p.add_argument("--stable-timeout", type=float, default=30.0, help="s to wait for a stable leader before a round")
    p.add_argument("--rejoin-timeout", type=float, default=30.0, help="s for the killed member to rejoin")
    p.add_argument("--idle-seconds", type=float, default=10.0, help="length of the idle CPU measurement (0: skip)")
    p.add_argument("--seed", type=int, help="seed of the kill delays (default: random, printed)")
    p.add_argument("--conclave-log", default="info", help="conclave's --log filter (its log goes to a file)")
    p.add_argument("--etcd-log", default="error", help="etcd's --log-level (its log goes to a file)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, data) at the end")
    p.add_argument("--verbose", action="store_true", help="print every survivor's view changes in each round")
    args = p.parse_args(argv)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for s in args.systems:
        if s not in ("conclave", "etcd"):
            p.error(f"--systems: unknown system {s!r} (conclave, etcd)")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    if args.poll_ms <= 0 or args.settle < 0 or args.failover_cap <= 0:
        p.error("--poll-ms and --failover-cap must be positive, --settle not negative")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    rng = random.Random(seed)

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    # Also when started in the background, where a shell leaves SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    etcd = etcdctl = None
    etcd_ver = "not used"
    if "etcd" in args.systems:
        etcd, etcdctl = ensure_etcd()
        etcd_ver = etcd_version(etcd)
    binary = None
    if "conclave" in args.systems:
        binary = args.conclave_bin.resolve() if args.conclave_bin else build_conclave()
        if not os.access(binary, os.X_OK):
            raise BenchError(f"--conclave-bin {binary} is not an executable file")

    log("")
    log("Failover after kill -9: conclave vs etcd")
    log("command:  python3 " + " ".join(["bench/failover.py", *argv]))
    for line in machine_lines(etcd_ver, binary or Path("-")):
        log(line)
    log(f"seed:     {seed}")

    tmp = Path(tempfile.mkdtemp(prefix="conclave-failover-"))
    clusters: list[Cluster] = []
    results: dict[str, SystemResult] = {}
    failed = True
    try:
        ports = PortPool()
        for system in args.systems:
            root = tmp / system
            root.mkdir()
            if system == "conclave":
                cluster: Cluster = ConclaveCluster(root, ports, binary, args.conclave_log, TIMINGS[args.timings])
                version = conclave_version(binary)
            else:
                cluster = EtcdCluster(root, ports, etcd, etcdctl, args.etcd_log, TIMINGS[args.timings])
                version = etcd_ver
            clusters.append(cluster)
            results[system] = SystemResult(system, version)
            try:
                run_system(cluster, results[system], args, rng)
            except BenchError as err:
                results[system].aborted = str(err)
                log(f"  !! {system}: {err}")
            finally:
                stopped = cluster.stop_all()
                log(f"  {system}: stopped {stopped} member(s)")
        log(f"\nload average at the end: {loadavg()}")
        code = report(results, args)
        failed = any(r.aborted for r in results.values())
        return 2 if failed else code
    finally:
        for cluster in clusters:
            cluster.stop_all()
        strays = [m for c in clusters for m in c.members.values() if m.proc is not None and m.proc.poll() is None]
        if strays:
            log(f"WARNING: still running: {', '.join(f'{m.name} (pid {m.proc.pid})' for m in strays)}")
        if args.keep or failed:
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
        print("interrupted; every member was stopped", file=sys.stderr)
        sys.exit(130)
