"""What the benchmark programs share: starting members that die with the program, ports on
loopback, quiet subprocesses, and how a failure ends a benchmark.

Imported by `bench/failover.py` and `bench/lossy_link.py` (a script's own directory is on
Python's module path). Standard library only (Python 3.11); Linux.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
from pathlib import Path


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


def free_port(kind: int) -> int:
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
