#!/usr/bin/env python3
"""Writes bins/gateway/idle-order.txt: the functions an idle node runs, for the linker to lay out
together.

The kernel maps a program's code in 64 KiB blocks around each page it touches. Scattered
through the executable, the functions a node runs from its start to an idle minute made nearly
all of its code resident (docs/benchmarks.md, "Idle memory with the replicated log"). Given their
symbols in a file, LLD places them first, side by side (bins/gateway/build.rs).

The program runs the cluster of bench/idle_cost.py (three nodes on loopback, the replicated
log on, the default timings) with every node under Valgrind's callgrind, so that a leader's and
a follower's code are both seen, waits until all three name one leader, lets them idle for
`--seconds`, has callgrind write what ran, and stops them. Then it does the same again with
the admin API and the metrics over TLS, as `docs/operations.md` secures a cluster: a TLS node
also runs what reads its certificate and key and sets up rustls, once, at its start; left
scattered through the executable, that code kept 2 MiB more of it resident. The functions of
the first run are listed first; those only the second ran follow them, so a node without TLS
has the same code together as before. Each instruction that ran is looked up in the linker's
map of the same build, which names the function (input section) it belongs to. Build and run:

    CONCLAVE_LINK_MAP=/tmp/conclave.map cargo build --release -p conclave-gateway
    python3 bench/idle_order.py --conclave-bin target/release/conclave --map /tmp/conclave.map

then build again: the link reads the new list. Symbol names carry a hash of the build's
settings (dependency versions and features, profile, compiler), so the list is written anew
after any change of those; names the build no longer defines are skipped by the linker.
Needs valgrind and openssl. Standard library and the programs beside it; Linux.
"""

import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from bisect import bisect_right
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import idle_cost  # noqa: E402  (the cluster's configuration and status calls)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "bins" / "gateway" / "idle-order.txt"

# An lld map line: VMA, LMA, size, alignment, then what it describes (indented by depth).
MAP_LINE = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s(\s*)(\S.*)$")


def text_sections(map_file: Path) -> tuple[list[int], list[tuple[int, int, str]]]:
    """The input sections of the output `.text`, in address order: (start, size, a symbol
    defined in it), and their start addresses for bisecting."""
    sections: list[tuple[int, int, str | None]] = []
    in_text = False
    for line in map_file.read_text(errors="replace").splitlines():
        match = MAP_LINE.match(line)
        if not match:
            continue
        address, size, indent, what = match.groups()
        depth = len(indent) // 8
        if depth == 0:
            in_text = what == ".text"
        elif in_text and depth == 1:
            sections.append([int(address, 16), int(size, 16), None])
        elif in_text and depth == 2 and sections and sections[-1][2] is None:
            if int(address, 16) >= sections[-1][0]:
                sections[-1][2] = what.strip()
    named = [(start, size, name) for start, size, name in sections if name and size]
    return [start for start, _, _ in named], named


def executed(outputs: list[Path], binary: Path) -> set[int]:
    """Addresses of the instructions of `binary` that callgrind saw run: callgrind writes them
    as the linker placed them (a position-independent executable's load address taken off),
    the addresses of the map."""
    seen: set[int] = set()
    for output in outputs:
        mine = False
        for line in output.read_text(errors="replace").splitlines():
            if line.startswith("ob="):
                mine = line[3:].strip().endswith(str(binary))
            elif mine and line.startswith("0x"):
                # A call's target is left out: it may lie in another object (`cob=`), and
                # its own instructions are listed under its own function anyway.
                seen.add(int(line.split()[0], 16))
    return seen


def profile(binary: Path, seconds: float, work: Path, tls: bool) -> list[Path]:
    """Runs the idle cluster under callgrind, with TLS when `tls`; the dumps it wrote."""
    context, files = idle_cost.tls_setup(work / "tls", "idle-order") if tls else (None, None)
    configs = idle_cost.write_configs(work, None, True, files)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONCLAVE", "RUST_LOG"))}
    procs = {}
    try:
        for name, (config, _) in configs.items():
            log = open(work / f"{name}.log", "wb")
            procs[name] = subprocess.Popen(
                ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work}/{name}.cg",
                 "--dump-instr=yes", "--dump-line=no", "--compress-pos=no",
                 "--compress-strings=no", str(binary), "run", "--config", str(config)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            views = [idle_cost.status(port, context) for _, port in configs.values()]
            leaders = {v.get("leader") if v else None for v in views}
            if len(leaders) == 1 and None not in leaders:
                break
            time.sleep(1)
        else:
            raise RuntimeError("no leader all three name within 300 s")
        time.sleep(seconds)
        for proc in procs.values():
            subprocess.run(["callgrind_control", "--dump", str(proc.pid)],
                           check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        time.sleep(2)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return [Path(p) for p in sorted(glob.glob(f"{work}/*.cg*"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conclave-bin", type=Path, required=True,
                        help="a release build linked with CONCLAVE_LINK_MAP")
    parser.add_argument("--map", type=Path, required=True, help="that build's linker map")
    parser.add_argument("--seconds", type=float, default=60, help="idle time profiled")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    binary = args.conclave_bin.resolve()
    starts, sections = text_sections(args.map)
    if not sections:
        print(f"no .text input sections in {args.map}", file=sys.stderr)
        return 1
    runs: list[dict[int, str]] = []
    for tls in (False, True):
        with tempfile.TemporaryDirectory(prefix="conclave-order-") as tmp:
            addresses = executed(profile(binary, args.seconds, Path(tmp), tls), binary)
        hot: dict[int, str] = {}
        for address in addresses:
            index = bisect_right(starts, address) - 1
            if index >= 0:
                start, size, name = sections[index]
                if address < start + size:
                    hot[start] = name
        runs.append(hot)
    plain, with_tls = runs
    tls_only = {start: name for start, name in with_tls.items() if start not in plain}
    args.out.write_text("".join(f"{plain[s]}\n" for s in sorted(plain))
                        + "".join(f"{tls_only[s]}\n" for s in sorted(tls_only)))
    total = sum(s for _, s, _ in sections)
    for what, hot in (("without TLS", plain), ("with TLS only", tls_only)):
        size = sum(sections[bisect_right(starts, s) - 1][1] for s in hot)
        print(f"{what}: {len(hot)} of {len(sections)} functions ran, {size / 1024:.0f} of "
              f"{total / 1024:.0f} KiB of code")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
