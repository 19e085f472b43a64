"""What the benchmark programs share: starting members that die with the program, ports on
loopback, quiet subprocesses, and how a failure ends a benchmark.

Imported by the programs beside it (a script's own directory is on Python's module path). Standard library only (Python 3.11); Linux.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path


# The repository this program belongs to.
REPO = Path(__file__).resolve().parent.parent


class BenchError(Exception):
    """A failure that ends the benchmark (or one part of it) with a clear message."""


def log(message: str = "") -> None:
    print(message, flush=True)


def die_with_parent() -> None:
    """Runs in the child before exec: its own session, and SIGKILL when this program dies.

    PR_SET_PDEATHSIG follows the thread that forked: start members from the main thread, which
    lives as long as the program."""
    os.setsid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def loadavg() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "unknown"


def clean_env(drop_prefixes: tuple[str, ...]) -> dict[str, str]:
    """This environment without variables that would change a member's configuration."""
    return {k: v for k, v in os.environ.items() if not k.startswith(drop_prefixes)}


def run_quiet(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as err:
        raise BenchError(f"{' '.join(argv)} did not finish within {timeout:.0f} s") from err
    except OSError as err:
        raise BenchError(f"cannot run {argv[0]}: {err}") from err


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port on 127.0.0.1 that nothing listens on now (TCP or UDP per `kind`)."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PortPool:
    """Hands out distinct free loopback ports."""

    def __init__(self) -> None:
        self.given: set[int] = set()

    def take(self, kind: int = socket.SOCK_STREAM) -> int:
        for _ in range(100):
            port = free_port(kind)
            if port not in self.given:
                self.given.add(port)
                return port
        raise BenchError("could not find a free loopback port in 100 tries")


def stop_members(members: Iterable, grace_s: float) -> int:
    """Stops members started with `die_with_parent` (each has `proc`, `log_file` and `alive()`):
    SIGTERM to the running ones' process groups, `grace_s` for them to end, then SIGKILL to
    every group, the exited ones' too (nothing may stay behind), and their logs closed.
    Returns how many were still running."""
    members = list(members)
    running = [m for m in members if m.alive()]
    for member in running:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(member.proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for member in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            member.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    for member in members:
        if member.proc is None:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(member.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            member.proc.wait(timeout=5)
        if member.log_file is not None:
            member.log_file.close()
            member.log_file = None
    return len(running)


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, or "unknown"."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def build_conclave() -> Path:
    """Builds the `conclave` binary in release mode and returns its path."""
    log("building conclave: cargo build --release -p conclave-gateway")
    try:
        done = subprocess.run(["cargo", "build", "--release", "-p", "conclave-gateway"], cwd=REPO,
                              stdin=subprocess.DEVNULL, timeout=3600)
    except FileNotFoundError as err:
        raise BenchError("cargo is not on PATH; build conclave yourself and pass --conclave-bin") from err
    except subprocess.TimeoutExpired as err:
        raise BenchError("cargo build took more than an hour") from err
    if done.returncode != 0:
        raise BenchError(f"cargo build --release -p conclave-gateway failed (exit {done.returncode})")
    meta = run_quiet(["cargo", "metadata", "--format-version", "1", "--no-deps"], timeout=120)
    target = Path(json.loads(meta.stdout)["target_directory"]) if meta.returncode == 0 else REPO / "target"
    binary = target / "release" / "conclave"
    if not binary.exists():
        raise BenchError(f"cargo build succeeded but {binary} does not exist")
    return binary


def make_certificates(root: Path, name: str = "bench") -> tuple[Path, Path, Path]:
    """A CA and a certificate for 127.0.0.1 it signed (P-256), made with openssl in `root`: the
    CA's, the certificate's and the key's paths."""
    root.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
         "-subj", f"/CN={name} CA"],
        ["req", *ec, "-keyout", "node.key", "-out", "node.csr", "-subj", f"/CN={name}"],
        ["x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "node.pem", "-days", "2", "-extfile", "node.ext"],
    ]
    (root / "node.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    for step in steps:
        done = subprocess.run(["openssl", *step], cwd=root, capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError(f"openssl {' '.join(step)}: {done.stderr}")
    return root / "ca.pem", root / "node.pem", root / "node.key"
