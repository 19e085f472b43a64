#!/usr/bin/env python3
"""Resident memory per stored byte: conclave against etcd, for the same data, in one run.

Issue 26, item 4: every replica holds the whole store in memory, so `log.max_store_bytes` must
be chosen from what a stored byte costs a node. This program measures it, beside etcd's:

1. starts three conclave nodes and three etcd members exactly as `bench/kv_commit.py` does
   (its classes: raft with `[log] enabled = true`, etcd at its defaults, one temporary
   directory), waits for each cluster's leader, and reads every member's RSS after
   `--idle-seconds`;
2. writes `--keys` distinct keys of `--value-bytes` bytes to each system's leader, the same
   keys and values to both, from `--clients` kept-alive connections (conclave: `PUT
   /v1/kv/{key}`; etcd: `POST /v3/kv/put`), checking every answer is 200;
3. waits `--idle-seconds` again and reads every member's RSS, and conclave's own count of
   what its store weighs (`conclave_log_store_bytes` on the leader);
4. prints, per member, RSS before and after, and the growth divided by the bytes stored (the
   keys' and values' bytes): the memory each stored byte costs. The ratio conclave / etcd of
   the medians closes the output.

conclave also keeps the last 10,000 changes for watches (values included), and etcd its MVCC
revisions: both are part of what a stored byte costs, and both are counted.

Standard library only (Python 3.11). Run from anywhere:
    python3 bench/store_rss.py --conclave-bin target/release/conclave
Exit code: 0 when the run completed, 2 on an error.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kv_commit import (  # noqa: E402  (the shared cluster code of the commit benchmark)
    BenchError,
    ConclaveCluster,
    EtcdCluster,
    ensure_conclave,
    ensure_etcd,
    log,
    machine,
    read_response,
    scrape,
    version_of,
)

MIB = 1024 * 1024


async def write_all(cluster, port: int, keys: int, value: str, clients: int) -> float:
    """Writes keys 0..keys-1 to `port` from `clients` connections; the seconds it took."""
    next_key = iter(range(keys))
    failures: list[str] = []

    async def client() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for n in next_key:
                line, body = cluster.put_request(f"store-rss/{n:08d}", value)
                writer.write(f"{line} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                status = await read_response(reader)
                if status != 200:
                    failures.append(f"key {n}: {status}")
                    return
        finally:
            writer.close()

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(clients)))
    if failures:
        raise BenchError(f"{cluster.system}: writes refused: {failures[:5]}")
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conclave-bin", type=Path, default=Path("target/release/conclave"))
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--value-bytes", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--idle-seconds", type=float, default=10.0,
                        help="settle before each RSS reading")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the data directories go (a new temporary one inside)")
    args = parser.parse_args()

    clusters = []
    tmp = None
    try:
        etcd = ensure_etcd()
        binary = ensure_conclave(args.conclave_bin.resolve())
        tmp = tempfile.TemporaryDirectory(prefix="conclave-store-rss-", dir=args.dir)
        root = Path(tmp.name)
        for line in machine():
            log(line)
        log(f"conclave: {binary} ({version_of([str(binary), '--version'])}); etcd: {version_of([etcd, '--version'])}")
        (root / "conclave").mkdir()
        (root / "etcd").mkdir()
        conclave = ConclaveCluster(root / "conclave", binary)
        etcd_cluster = EtcdCluster(root / "etcd", etcd)
        clusters = [conclave, etcd_cluster]
        for cluster in clusters:
            cluster.start()
        leaders = {cluster.system: cluster.wait_leader() for cluster in clusters}
        time.sleep(args.idle_seconds)
        before = {c.system: {n: m.rss_mib() for n, m in c.members.items()} for c in clusters}

        value = "v" * args.value_bytes
        stored = sum(len(f"store-rss/{n:08d}") + args.value_bytes for n in range(args.keys))
        log(f"{args.keys} keys of {args.value_bytes}-byte values, {stored} bytes of keys and "
            f"values ({stored / MIB:.1f} MiB), from {args.clients} connections to each leader")
        for cluster in clusters:
            leader = cluster.members[leaders[cluster.system]]
            seconds = asyncio.run(write_all(cluster, leader.http_port, args.keys, value, args.clients))
            log(f"{cluster.system}: written in {seconds:.1f} s")
        time.sleep(args.idle_seconds)
        after = {c.system: {n: m.rss_mib() for n, m in c.members.items()} for c in clusters}
        leader = conclave.members[leaders["conclave"]]
        weight = scrape(leader.metrics_port, {"w": "conclave_log_store_bytes"}).get("w")
        if weight is not None:
            log(f"conclave's own count (conclave_log_store_bytes on {leader.name}): {weight:.0f} bytes "
                f"({weight / MIB:.1f} MiB; a key weighs its key and value plus 128 bytes)")

        log()
        log("member          RSS before  RSS after  growth   growth per stored byte")
        per_byte: dict[str, list[float]] = {}
        for cluster in clusters:
            for name in cluster.members:
                grown = after[cluster.system][name] - before[cluster.system][name]
                ratio = grown * MIB / stored
                per_byte.setdefault(cluster.system, []).append(ratio)
                log(f"{cluster.system:<8} {name:<7} {before[cluster.system][name]:>8.1f} MiB "
                    f"{after[cluster.system][name]:>7.1f} MiB {grown:>6.1f} MiB {ratio:>10.2f}")
        medians = {system: statistics.median(values) for system, values in per_byte.items()}
        log()
        log(f"median RSS growth per stored byte: conclave {medians['conclave']:.2f}, "
            f"etcd {medians['etcd']:.2f}, ratio conclave / etcd {medians['conclave'] / medians['etcd']:.2f}")
        return 0
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        for cluster in clusters:
            cluster.stop()
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
