#!/usr/bin/env bash
# scripts/bench_replay.sh — rate of `newsdedup replay` next to `newsdedup run`'s, in one session.
#
# Usage: scripts/bench_replay.sh [N]
#   N  corpus articles produced to articles.raw (4 partitions) before anything starts (default 15000)
#
# 1. `run` works through the backlog (fresh index, outputs to articles.*).
# 2. `replay` of the same topic into another fresh index (outputs to replay.*): every record decided
#    anew, as a backfill into an empty index does.
# 3. `replay` again into the index of step 2 (outputs to known.*): every decision from the index.
# Rates are measured the same way for all three: records / (timestamp of the last output record -
# timestamp of the first one) (examples/kafka_load.rs measure), so start-up and group join do not
# count; the replay's own summary rate (wall clock from its first fetch to its final commit) is
# printed too.
#
# Everything runs on this machine: broker (scripts/broker.sh, Tansu), service, load generator.
# Needs the corpus (NEWSDEDUP_CORPUS_DIR, default ../shared/data/corpus).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/newsdedup/target}"
export NEWSDEDUP_CORPUS_DIR="${NEWSDEDUP_CORPUS_DIR:-$(cd .. && pwd)/shared/data/corpus}"

N="${1:-15000}"

cargo build --release --quiet --bin newsdedup --example kafka_load
BIN="${NEWSDEDUP_BENCH_BIN:-$CARGO_TARGET_DIR/release/newsdedup}"
LOAD="$CARGO_TARGET_DIR/release/examples/kafka_load"

WORK="$(mktemp -d /tmp/newsdedup-bench-replay.XXXXXX)"
SERVICE_PID=""
cleanup() {
    if [[ -n "$SERVICE_PID" ]] && kill -0 "$SERVICE_PID" 2>/dev/null; then
        kill -TERM "$SERVICE_PID" 2>/dev/null || true
        wait "$SERVICE_PID" 2>/dev/null || true
    fi
    scripts/broker.sh stop --state-dir "$WORK/broker" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

B="$(scripts/broker.sh start --state-dir "$WORK/broker" | tail -n1)"
scripts/broker.sh create-topics --state-dir "$WORK/broker" articles.raw:4 \
    articles.unique:1 articles.duplicate:1 articles.dlq:1 \
    replay.unique:1 replay.duplicate:1 replay.dlq:1 \
    known.unique:1 known.duplicate:1 known.dlq:1 2>/dev/null

echo "== producing $N articles (backlog)" >&2
"$LOAD" produce --brokers "$B" --count "$N" >&2

echo "== run over the backlog" >&2
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$BIN" run --brokers "$B" --index-dir "$WORK/run-index" --metrics-addr "127.0.0.1:$PORT" \
    -X session.timeout.ms=6000 -X heartbeat.interval.ms=500 -X max.poll.interval.ms=10000 --rebalance-timeout-ms 5000 \
    2>"$WORK/run.log" &
SERVICE_PID=$!
RUN="$("$LOAD" measure --brokers "$B" --expect "$N" --idle-timeout 120)"
kill -TERM "$SERVICE_PID"
wait "$SERVICE_PID"
SERVICE_PID=""

replay() { # $1: index dir, $2: output topic prefix, $3: group; prints "measured|summary"
    "$BIN" replay --brokers "$B" --topic articles.raw --index-dir "$1" --group-id "$3" --quiet \
        --unique-topic "$2.unique" --duplicate-topic "$2.duplicate" --dlq-topic "$2.dlq" \
        2>"$WORK/$2.log"
    local measured
    measured="$("$LOAD" measure --brokers "$B" --topics "$2.unique,$2.duplicate,$2.dlq" --expect "$N" --idle-timeout 60)"
    echo "$measured|$(sed -n 's/^replay: done: //p' "$WORK/$2.log")"
}

echo "== replay into a fresh index" >&2
FRESH="$(replay "$WORK/replay-index" replay bench-fresh)"
echo "== replay again into the same index" >&2
KNOWN="$(replay "$WORK/replay-index" known bench-known)"

python3 - "$RUN" "$FRESH" "$KNOWN" "$(nproc)" <<'PY'
import json, subprocess, sys
run = json.loads(sys.argv[1])
def split(s):
    measured, summary = s.split("|", 1)
    return json.loads(measured), json.loads(summary)
(fm, fs), (km, ks) = split(sys.argv[2]), split(sys.argv[3])
cpu = next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
machine = subprocess.run(["bash", "scripts/machine.sh"], capture_output=True, text=True).stdout.strip()
r = run["articles_per_sec"]
print(json.dumps({
    "machine": {"cores": int(sys.argv[4]), "cpu": cpu, "description": machine},
    "records": run["records"],
    "run_articles_per_sec": r,
    "replay_fresh_index": {"articles_per_sec": fm["articles_per_sec"], "vs_run": round(fm["articles_per_sec"] / r, 2),
                           "summary_records_per_sec": fs["records_per_sec"], "summary": fs},
    "replay_known_index": {"articles_per_sec": km["articles_per_sec"], "vs_run": round(km["articles_per_sec"] / r, 2),
                           "summary_records_per_sec": ks["records_per_sec"], "replayed": ks["replayed"]},
}, indent=2))
PY
