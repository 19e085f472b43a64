#!/usr/bin/env bash
# Checks dashboards/ (run from anywhere: `bash dashboards/check.sh`):
#   1. promtool is there (installed from Debian's `prometheus` package when missing);
#   2. the alert rules and the example Prometheus configuration load, and the alert unit
#      tests (prometheus/alerts_test.yml) pass;
#   3. the Grafana dashboard is valid JSON with a sound structure, and every query in it is
#      valid PromQL;
#   4. every conclave_* metric name the dashboard and the rules use is declared in
#      METRIC_NAMES and shows up in a live scrape of a two-node cluster built from this tree
#      (with the replicated log on, so that the log's series exist; the binary is
#      $CONCLAVE_BIN when set, else one built here);
#   5. `promtool check metrics` finds nothing to say about either node's scrape.
# Exits non-zero, naming what is wrong, when any of that fails.
set -euo pipefail
cd "$(dirname "$0")/.."

DASHBOARD=dashboards/grafana/conclave.json
RULES=dashboards/prometheus/alerts.yml
RULE_TESTS=dashboards/prometheus/alerts_test.yml
PROM_CONFIG=dashboards/prometheus/prometheus.yml
METRICS_RS=crates/actors/src/metrics.rs

# Names the node exports only after an event this check cannot cheaply cause. Each is still
# required to be declared in METRIC_NAMES; keep this list short and say why.
#   conclave_events_lagged_total: created when a subscriber (a hook queue of 64 runs, the
#   admin event stream) falls behind and loses events.
#   conclave_dongle_rssi_dbm: one series per peer heard over the radio; gw-b's lone virtual
#   dongle hears nobody.
#   conclave_log_learner_lag_entries: one series per learner, on the leader; both nodes here
#   are voters, and adding a learner needs a third process.
LAZY_NAMES=(conclave_events_lagged_total conclave_dongle_rssi_dbm conclave_log_learner_lag_entries)

step() { printf '\n==> %s\n' "$*"; }

step "promtool"
if ! command -v promtool >/dev/null 2>&1; then
    echo "promtool not found; installing Debian's prometheus package"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
        --no-install-recommends prometheus >/dev/null
fi
promtool --version | head -n 1

step "promtool check rules / check config / test rules"
promtool check rules "$RULES"
promtool check config "$PROM_CONFIG"
promtool test rules "$RULE_TESTS"

work=$(mktemp -d "${TMPDIR:-/tmp}/conclave-dashboards.XXXXXX")
pids=()
cleanup() {
    local pid i
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for ((i = 0; i < 50; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

step "dashboard JSON"
python3 -m json.tool "$DASHBOARD" >/dev/null
# Structure, then every query rewritten as a recording rule so that promtool parses it.
python3 - "$DASHBOARD" "$work/dashboard-queries.yml" <<'PY'
import json, re, sys

path, rules_out = sys.argv[1], sys.argv[2]
d = json.load(open(path, encoding="utf-8"))
problems = []
if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
    problems.append(f"schemaVersion {d.get('schemaVersion')!r}: expected 36 or later")
for key in ("uid", "title"):
    if not d.get(key):
        problems.append(f"top-level {key} missing")
variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
if variables.get("DS_PROMETHEUS", {}).get("type") != "datasource":
    problems.append("templating: no datasource variable DS_PROMETHEUS")
if variables.get("instance", {}).get("type") != "query":
    problems.append("templating: no query variable instance")
known = set(variables) | {"__range", "__rate_interval", "__interval", "__range_s",
                          "__interval_ms", "__name"}
# Substitutions that make a query plain PromQL.
values = {"__range": "1h", "__rate_interval": "20s", "__interval": "15s",
          "__range_s": "3600", "__interval_ms": "15000"}
for name, var in variables.items():
    if var.get("type") == "interval":
        values[name] = var.get("current", {}).get("value") or "5m"
    else:
        values[name] = ".+"

def check_variables(where, text):
    for name in re.findall(r"\$\{?(\w+)", text):
        if name not in known:
            problems.append(f"{where}: unknown variable ${name}")

def plain(expr):
    return re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(0)), expr)

queries = []
ids = set()
cells = {}
for panel in d.get("panels", []):
    pid, title = panel.get("id"), panel.get("title", "?")
    where = f"panel {pid} {title!r}"
    if pid in ids:
        problems.append(f"{where}: duplicate id")
    ids.add(pid)
    g = panel.get("gridPos") or {}
    if not all(isinstance(g.get(k), int) for k in "hwxy") or g["x"] + g["w"] > 24:
        problems.append(f"{where}: bad gridPos {g}")
    else:
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    problems.append(f"{where}: overlaps {cells[(x, y)]}")
                    break
                cells[(x, y)] = where
            else:
                continue
            break
    if panel.get("type") == "row":
        continue
    if (panel.get("datasource") or {}).get("uid") != "${DS_PROMETHEUS}":
        problems.append(f"{where}: datasource is not ${{DS_PROMETHEUS}}")
    targets = panel.get("targets") or []
    if not targets:
        problems.append(f"{where}: no queries")
    refs = [t.get("refId") for t in targets]
    if len(set(refs)) != len(refs) or None in refs:
        problems.append(f"{where}: refIds {refs} not unique")
    check_variables(where, panel.get("description", ""))
    for t in targets:
        expr = t.get("expr", "")
        if not expr.strip():
            problems.append(f"{where} {t.get('refId')}: empty expr")
            continue
        check_variables(f"{where} {t.get('refId')}", expr)
        queries.append((f"{where} {t.get('refId')}", plain(expr)))
for a in d.get("annotations", {}).get("list", []):
    if a.get("expr"):
        check_variables(f"annotation {a.get('name')!r}", a["expr"])
        queries.append((f"annotation {a.get('name')!r}", plain(a["expr"])))
for name, var in variables.items():
    q = var.get("query")
    q = q.get("query", "") if isinstance(q, dict) else (q or "")
    if var.get("type") == "query":
        check_variables(f"variable {name}", q)

with open(rules_out, "w", encoding="utf-8") as f:
    f.write("groups:\n  - name: dashboard-queries\n    rules:\n")
    for i, (where, expr) in enumerate(queries):
        f.write(f"      # {where}\n")
        f.write(f"      - record: dashboard_query_{i}\n        expr: {json.dumps(expr)}\n")
for p in problems:
    print(f"dashboard: {p}", file=sys.stderr)
if problems:
    sys.exit(1)
rows = sum(1 for p in d.get("panels", []) if p.get("type") == "row")
print(f"{path}: {len(ids) - rows} panels in {rows} rows, {len(queries)} queries, structure ok")
PY
promtool check rules "$work/dashboard-queries.yml" >/dev/null || {
    promtool check rules "$work/dashboard-queries.yml" || true
    echo "dashboard: a query is not valid PromQL (see above)" >&2
    exit 1
}
echo "every dashboard query parses as PromQL"

# CONCLAVE_BIN names a binary already built (.ci/run passes the one `cargo test --workspace`
# built: building `-p conclave-gateway` alone would compile much of it again with other
# features); without it, the debug binary is built here.
if [ -n "${CONCLAVE_BIN:-}" ]; then
    bin=$CONCLAVE_BIN
else
    step "cargo build -p conclave-gateway"
    cargo build -p conclave-gateway
    bin="${CARGO_TARGET_DIR:-target}/debug/conclave"
fi
[[ "$bin" == /* ]] || bin="$PWD/$bin"
[ -x "$bin" ] || { echo "no binary at $bin" >&2; exit 1; }

step "two-node cluster on loopback"
# Free loopback ports: TCP for the metrics endpoints, UDP for the links. Another process could
# take one between here and the bind; the wait below then fails with the node's log.
read -r metrics_a metrics_b udp_a udp_b < <(python3 - <<'PY'
import socket
socks = []
def free(kind):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
    return s.getsockname()[1]
print(free(socket.SOCK_STREAM), free(socket.SOCK_STREAM), free(socket.SOCK_DGRAM),
      free(socket.SOCK_DGRAM))
PY
)
# The node layers CONCLAVE__* variables over its file: keep the caller's out.
while read -r var; do unset "$var"; done < <(compgen -e | grep '^CONCLAVE__' || true)

write_config() { # name own_udp other_udp metrics_port
    cat >"$work/$1.toml" <<EOF
[node]
id = "$1"
data_dir = "$work/data-$1"

[cluster]
id = "dashboards-check"
voters = ["gw-a", "gw-b"]
# A cluster created here: each node records a genesis once both voters answered (WAL-5).
initial_state = "new"

# Fast timers so the cluster forms within a second or two.
[election.raft]
heartbeat_ms = 50
election_timeout_min_ms = 250
election_timeout_max_ms = 500

[membership]
heartbeat_ms = 100
hello_interval_ms = 100

[link.udp]
listen = "127.0.0.1:$2"
peers = ["127.0.0.1:$3"]

[admin]
listen = ""

[metrics]
listen = "127.0.0.1:$4"

# A hook, so that conclave_callbacks_total has a series.
[hooks]
on_leader_change = ["true"]

# The replicated log, so that its series exist (the leader exports the lag of its follower).
[log]
enabled = true
EOF
}
write_config gw-a "$udp_a" "$udp_b" "$metrics_a"
write_config gw-b "$udp_b" "$udp_a" "$metrics_b"
# gw-b also has a radio link, on the built-in virtual dongle, so that the dongle series exist.
printf '\n[link.espnow]\nport = "virtual"\n' >>"$work/gw-b.toml"
for node in gw-a gw-b; do
    # No pre-shared key in this throwaway cluster: the node warns about it in its log.
    (cd "$work" && NO_COLOR=1 exec "$bin" run --config "$work/$node.toml" --log info \
        >"$work/$node.log" 2>&1) &
    pids+=("$!")
done
echo "gw-a: metrics 127.0.0.1:$metrics_a, udp $udp_a; gw-b: metrics 127.0.0.1:$metrics_b, udp $udp_b"

show_logs() {
    for node in gw-a gw-b; do
        echo "--- $node log (last 40 lines)" >&2
        tail -n 40 "$work/$node.log" >&2 || true
    done
}
scrape() { # file to write both scrapes into; fails when either does not answer
    curl -sf --max-time 2 "http://127.0.0.1:$metrics_a/metrics" >"$1.a" &&
        curl -sf --max-time 2 "http://127.0.0.1:$metrics_b/metrics" >"$1.b" &&
        cat "$1.a" "$1.b" >"$1"
}
nodes_alive() {
    local pid
    for pid in "${pids[@]}"; do
        kill -0 "$pid" 2>/dev/null || { echo "a node exited early" >&2; show_logs; return 1; }
    done
}

deadline=$((SECONDS + 30))
until scrape "$work/scrape"; do
    nodes_alive || exit 1
    if ((SECONDS > deadline)); then
        echo "/metrics did not answer within 30 s" >&2
        show_logs
        exit 1
    fi
    sleep 0.2
done
echo "both /metrics endpoints answer"

deadline=$((SECONDS + 30))
until grep -qx 'conclave_election_is_leader 1' "$work/scrape"; do
    nodes_alive || exit 1
    if ((SECONDS > deadline)); then
        echo "no node reported conclave_election_is_leader 1 within 30 s" >&2
        show_logs
        exit 1
    fi
    sleep 0.2
    scrape "$work/scrape" || true
done
echo "a leader is elected: gw-a $(grep -x 'conclave_election_is_leader [01]' "$work/scrape.a"), gw-b $(grep -x 'conclave_election_is_leader [01]' "$work/scrape.b")"

step "metric names used by the dashboard and the rules"
# The names the node declares, the names used, and the names a scrape shows; histogram
# series (_bucket, _sum, _count) also count under their base name. Waits up to 15 s more
# for names that appear with later events (a ping's round trip, a hook run).
check_names() { # final: 0 while waiting, 1 for the last attempt (prints the report)
    python3 - "$1" "$work/scrape" "$METRICS_RS" "$DASHBOARD" "$RULES" "$RULE_TESTS" \
        -- "${LAZY_NAMES[@]}" <<'PY'
import re, sys

final = sys.argv[1] == "1"
scrape_path, metrics_rs, *rest = sys.argv[2:]
sep = rest.index("--")
used_files, lazy = rest[:sep], set(rest[sep + 1:])

source = open(metrics_rs, encoding="utf-8").read()
block = re.search(r"pub const METRIC_NAMES[^=]*=\s*&\[(.*?)\n\];", source, re.S)
declared = set(re.findall(r'"(conclave_[a-z_]+)"', block.group(1))) if block else set()

exported = set()
for line in open(scrape_path, encoding="utf-8"):
    m = re.match(r"# TYPE (\w+) histogram", line)
    if m:
        exported.add(m.group(1))
    elif line and not line.startswith("#"):
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", line)
        if m:
            exported.add(m.group(1))

used = {}
for path in used_files:
    for name in re.findall(r"conclave_[a-z_]+", open(path, encoding="utf-8").read()):
        used.setdefault(name, set()).add(path)

def base(name):
    return re.sub(r"_(bucket|sum|count)$", "", name)

missing, undeclared, lazy_seen = [], [], []
for name in sorted(used):
    if base(name) not in declared and name not in declared:
        undeclared.append(name)
    if name in exported:
        continue
    if base(name) in lazy or name in lazy:
        lazy_seen.append(name)
        continue
    missing.append(name)

if not final:
    sys.exit(1 if missing or undeclared else 0)
if not block:
    print(f"cannot find METRIC_NAMES in {metrics_rs}", file=sys.stderr)
    sys.exit(1)
if len(used) < 10:
    print(f"only {len(used)} conclave_* names found in {used_files}: extraction broken?",
          file=sys.stderr)
    sys.exit(1)
for name in sorted(used):
    if name in missing or name in undeclared:
        mark = "MISSING"
    elif name in lazy_seen:
        mark = "lazy (allow-listed, declared)"
    else:
        mark = "ok"
    print(f"  {mark:30} {name}")
unused = sorted(declared - {base(n) for n in used} - set(used))
if unused:
    print(f"note: declared but shown nowhere on the dashboard or in the rules: {', '.join(unused)}")
silent = sorted(n for n in declared if n not in exported and n not in lazy)
if silent:
    print(f"note: declared in METRIC_NAMES but absent from the scrape: {', '.join(silent)}")
for name in undeclared:
    print(f"{name}: used in {', '.join(sorted(used[name]))} but not declared in METRIC_NAMES "
          f"({metrics_rs})", file=sys.stderr)
for name in missing:
    print(f"{name}: used in {', '.join(sorted(used[name]))} but not in the scrape of a "
          f"running two-node cluster", file=sys.stderr)
if missing or undeclared:
    sys.exit(1)
print(f"{len(used)} names used, all declared and exported")
PY
}
deadline=$((SECONDS + 15))
until check_names 0; do
    nodes_alive || exit 1
    ((SECONDS <= deadline)) || break
    sleep 0.5
    scrape "$work/scrape" || true
done
if ! check_names 1; then
    echo "--- names in the scrape of both nodes" >&2
    grep -o '^conclave_[a-z_]*' "$work/scrape" | sort -u >&2 || true
    exit 1
fi

step "promtool check metrics (each node's scrape)"
for node in a b; do
    if ! report=$(promtool check metrics <"$work/scrape.$node" 2>&1) || [ -n "$report" ]; then
        echo "gw-$node: promtool check metrics:" >&2
        echo "$report" >&2
        exit 1
    fi
    echo "gw-$node: clean ($(grep -c '^# TYPE' "$work/scrape.$node") metric families)"
done

step "ok"
