#!/usr/bin/env bash
# scripts/bench_kafka.sh — throughput and latency of `newsdedup run` against a local broker.
#
# Usage: scripts/bench_kafka.sh [N] [RATE] [SECONDS]
#   N        corpus articles for the sustained-throughput phase   (default 15000)
#   RATE     articles/s offered in the latency phase                (default 500)
#   SECONDS  length of the latency phase                            (default 20)
#
# Phase 1 (throughput): N corpus articles are produced to articles.raw (4 partitions) before the
#   service starts; the service then works through the backlog. Sustained rate = N / (timestamp of
#   the last output record - timestamp of the first one), so start-up and group join do not count.
# Phase 2 (latency): with the service caught up, RATE articles/s (not seen before) are produced for
#   SECONDS; latency = output record timestamp - input record timestamp (both create times), and
#   also until a downstream consumer (fetch.wait.max.ms=10) has the output record. p50/p99/max.
#
# A standby (`newsdedup standby`, own index) follows the output topics throughout; during phase 2 its
#   lag (sum of newsdedup_standby_lag_records) is sampled every second: mean and max are printed.
# Phase 3 (rebuild): with the service stopped, `newsdedup index rebuild --brokers` reads the output
#   topics back into a new index; its rate (records/s, from its summary) is printed beside the
#   service's sustained rate, the goal being a rebuild at least as fast as the service.
#
# Extra `newsdedup run` arguments: NEWSDEDUP_BENCH_ARGS (e.g. "-X fetch.wait.max.ms=20").
# Another build of the service (an A/B against an older commit): NEWSDEDUP_BENCH_BIN=/path/newsdedup.
# Every phase-2 record's times (input, output record, receipt; ms) into a file: NEWSDEDUP_BENCH_SAMPLES=FILE.
# Also printed: the service's peak RSS (VmHWM) and the mean records per index fsync (group commit).
#
# Everything runs on this machine: broker (scripts/broker.sh, Tansu), service, load generator
# (examples/kafka_load.rs). Needs the corpus (NEWSDEDUP_CORPUS_DIR, default ../shared/data/corpus).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/newsdedup/target}"
export NEWSDEDUP_CORPUS_DIR="${NEWSDEDUP_CORPUS_DIR:-$(cd .. && pwd)/shared/data/corpus}"

N="${1:-15000}"
RATE="${2:-500}"
SECS="${3:-20}"

# Phase 2 takes fresh articles after the backlog's: refuse up front what the corpus cannot feed.
if compgen -G "$NEWSDEDUP_CORPUS_DIR/*.jsonl" >/dev/null; then
    have=$(cat "$NEWSDEDUP_CORPUS_DIR"/*.jsonl | wc -l)
    if (( N + RATE * SECS > have )); then
        echo "bench_kafka: the corpus has $have articles; the backlog ($N) and the latency phase" \
             "($RATE/s for $SECS s = $((RATE * SECS))) need $((N + RATE * SECS)): lower N, RATE or SECONDS" >&2
        exit 2
    fi
fi

cargo build --release --quiet --bin newsdedup --example kafka_load
BIN="${NEWSDEDUP_BENCH_BIN:-$CARGO_TARGET_DIR/release/newsdedup}"
LOAD="$CARGO_TARGET_DIR/release/examples/kafka_load"

WORK="$(mktemp -d /tmp/newsdedup-bench.XXXXXX)"
SERVICE_PID=""
STANDBY_PID=""
SAMPLER_PID=""
cleanup() {
    for pid in "$SAMPLER_PID" "$SERVICE_PID" "$STANDBY_PID"; do
        if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    scripts/broker.sh stop --state-dir "$WORK/broker" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

B="$(scripts/broker.sh start --state-dir "$WORK/broker" | tail -n1)"
scripts/broker.sh create-topics --state-dir "$WORK/broker" \
    articles.raw:4 articles.unique:1 articles.duplicate:1 articles.dlq:1 2>/dev/null

echo "== producing $N articles (backlog)" >&2
"$LOAD" produce --brokers "$B" --count "$N" >&2

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$BIN" run --brokers "$B" --index-dir "$WORK/index" --metrics-addr "127.0.0.1:$PORT" \
    -X session.timeout.ms=6000 -X heartbeat.interval.ms=500 -X max.poll.interval.ms=10000 --rebalance-timeout-ms 5000 \
    ${NEWSDEDUP_BENCH_ARGS:-} 2>"$WORK/service.log" &
SERVICE_PID=$!

STANDBY_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$BIN" standby --brokers "$B" --index-dir "$WORK/standby" --metrics-addr "127.0.0.1:$STANDBY_PORT" \
    2>"$WORK/standby.log" &
STANDBY_PID=$!

echo "== throughput over the backlog" >&2
THROUGHPUT="$("$LOAD" measure --brokers "$B" --expect "$N" --idle-timeout 120)"
echo "$THROUGHPUT" >&2

echo "== latency at $RATE articles/s for ${SECS}s" >&2
( while sleep 1; do
      curl -s "http://127.0.0.1:$STANDBY_PORT/metrics" 2>/dev/null |
          awk '$1 ~ /^newsdedup_standby_lag_records[{]/ {s += $2} END {print s + 0}'
  done >"$WORK/standby_lag" ) &
SAMPLER_PID=$!
LATENCY="$("$LOAD" latency --brokers "$B" --rate "$RATE" --seconds "$SECS" --skip "$N" \
    ${NEWSDEDUP_BENCH_SAMPLES:+--samples "$NEWSDEDUP_BENCH_SAMPLES"})"
kill "$SAMPLER_PID" 2>/dev/null || true
wait "$SAMPLER_PID" 2>/dev/null || true
SAMPLER_PID=""
STANDBY_LAG="$(awk '{n++; s+=$1; if ($1>m) m=$1} END {printf "{\"samples\": %d, \"mean\": %.0f, \"max\": %d}", n, (n ? s/n : 0), m}' "$WORK/standby_lag")"
kill -TERM "$STANDBY_PID"
wait "$STANDBY_PID" || true
STANDBY_PID=""
echo "$LATENCY" >&2

METRICS="$(curl -s "http://127.0.0.1:$PORT/metrics" 2>/dev/null || true)"
PEAK_RSS_KB="$(awk '/^VmHWM:/ {print $2}' "/proc/$SERVICE_PID/status" 2>/dev/null || echo 0)"
kill -TERM "$SERVICE_PID"
wait "$SERVICE_PID"
SERVICE_PID=""

echo "== rebuild from the output topics" >&2
REBUILD="$("$BIN" index rebuild --brokers "$B" --index-dir "$WORK/rebuilt" --quiet)"
echo "$REBUILD" >&2

stage() { # mean seconds of a stage from the metrics text
    awk -v s="$1" '$1 == "newsdedup_stage_seconds_sum{stage=\"" s "\"}" {sum=$2}
                   $1 == "newsdedup_stage_seconds_count{stage=\"" s "\"}" {n=$2}
                   END { if (n > 0) printf "%.3f", 1000 * sum / n; else printf "?" }' <<<"$METRICS"
}

group() { # mean records per index fsync (absent before group commit existed)
    awk '$1 == "newsdedup_group_commit_records_sum" {sum=$2}
         $1 == "newsdedup_group_commit_records_count" {n=$2}
         END { if (n > 0) printf "%.1f", sum / n; else printf "?" }' <<<"$METRICS"
}

python3 - "$THROUGHPUT" "$LATENCY" "$(nproc)" "$(stage prepare)" "$(stage decide)" "$(stage sync)" \
    "$PEAK_RSS_KB" "$(group)" "$REBUILD" "$STANDBY_LAG" <<'PY'
import json, platform, subprocess, sys
t, l, r = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[9])
standby_lag = json.loads(sys.argv[10])
rebuild_rate = r["records"] / max(r["elapsed"], 1e-9)
cpu = next((x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")), "?")
machine = subprocess.run(["bash", "scripts/machine.sh"], capture_output=True, text=True).stdout.strip()
print(json.dumps({
    "machine": {"cores": int(sys.argv[3]), "cpu": cpu, "description": machine},
    "sustained_articles_per_sec": t["articles_per_sec"],
    "backlog_articles": t["records"],
    "mean_ms_per_article": {"prepare (one core)": sys.argv[4], "decide": sys.argv[5]},
    "mean_ms_per_index_fsync": sys.argv[6],
    "records_per_fsync": sys.argv[8],
    "service_peak_rss_mb": round(int(sys.argv[7] or 0) / 1024, 1),
    "latency_at_rate": l["offered_rate"],
    "latency_to_output_record_ms": l["latency_to_output_record_ms"],
    "latency_to_downstream_receipt_ms": l["latency_to_downstream_receipt_ms"],
    "standby_lag_records_at_rate": standby_lag,
    "rebuild_records": r["records"],
    "rebuild_records_per_sec": round(rebuild_rate),
    "rebuild_vs_sustained": round(rebuild_rate / t["articles_per_sec"], 2),
}, indent=2))
PY
