#!/usr/bin/env bash
# Regenerates the Figure 16 figures of docs/benchmarks.md from `election_bench`, or checks them.
#
#   bash bench/figure16.sh           rewrite every block marked <!-- election_bench output: ARGS -->
#                                    with what the program prints for ARGS at this commit
#   bash bench/figure16.sh --check   compare instead (the full tables too), change nothing
#
# The simulator is deterministic: the output depends on the code and the arguments only. The
# prose of docs/benchmarks.md that quotes figures (the side-by-side table, the reading) is
# not rewritten: read the diff and update it by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
DOC=docs/benchmarks.md

if [ "${1:-}" = "--check" ]; then
    # conclave-core is optimised in dev builds too (Cargo.toml), so no release build is needed.
    CONCLAVE_FULL_FIGURES=1 exec cargo test -p conclave-harness --test figure16_doc
fi
[ $# -eq 0 ] || { echo "usage: bash bench/figure16.sh [--check]" >&2; exit 64; }

cargo build --release -p conclave-harness --example election_bench
bin="${CARGO_TARGET_DIR:-target}/release/examples/election_bench"
python3 - "$DOC" "$bin" <<'PY'
import re, subprocess, sys, time

doc_path, binary = sys.argv[1], sys.argv[2]
doc = open(doc_path, encoding="utf-8").read()
pattern = re.compile(r"(<!-- election_bench output:(?P<args>[^>]*)-->\n+```text\n)(?P<body>.*?)(```)", re.S)

def regenerate(match):
    args = match.group("args").split()
    started = time.monotonic()
    run = subprocess.run([binary, *args], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"election_bench {' '.join(args)} failed ({run.returncode}):\n{run.stderr}")
    print(f"election_bench {' '.join(args) or '(defaults)'}: {time.monotonic() - started:.1f} s; "
          f"{run.stderr.strip()}", file=sys.stderr)
    return match.group(1) + run.stdout + match.group(4)

new, count = pattern.subn(regenerate, doc)
if count == 0:
    sys.exit(f"no <!-- election_bench output: ... --> block in {doc_path}")
if new != doc:
    open(doc_path, "w", encoding="utf-8").write(new)
    print(f"{doc_path}: {count} block(s) regenerated; changed (see git diff)", file=sys.stderr)
else:
    print(f"{doc_path}: {count} block(s) regenerated; unchanged", file=sys.stderr)
PY
