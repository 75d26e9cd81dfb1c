#!/usr/bin/env bash
# scripts/demo.sh — newsdedup end to end on this machine, from a fresh clone.
#
# Usage:
#   scripts/demo.sh [--articles FILE]
#
# Installs the build prerequisites (scripts/setup.sh; Rust with rustup if cargo is missing or
# too old), builds the release binary and the producer (examples/kafka_load.rs), starts a local
# Kafka-protocol broker (scripts/broker.sh: Tansu), creates the topics, produces the articles to
# articles.raw, runs `newsdedup run` on them and waits until every input record has an output in
# articles.unique, articles.duplicate or articles.dlq. Then it prints the result: how many
# articles are unique, duplicate or invalid (by reason), each duplicate with the article it
# repeats, and each invalid record's reason. Everything it starts is stopped at the end, on
# Ctrl-C and on errors too, and its state (broker, index, logs) lives in a temporary directory
# that is removed.
#
# Options:
#   --articles FILE   JSONL articles to run (default: examples/sample_articles.jsonl, original
#                     sample text with planted reposts and malformed records; examples/README.md)
#   -h, --help        this text
#
# The first build takes ~30 minutes on 2 cores (RocksDB and librdkafka are compiled from
# source); once built, a run takes ~15 seconds. Environment: CARGO_TARGET_DIR (default
# $HOME/.cache/newsdedup/target), NEWSDEDUP_CACHE (where the broker binary is kept).

set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PROG="$(basename "$0")"
ARTICLES="$ROOT/examples/sample_articles.jsonl"

say() { printf '\n== %s\n' "$*"; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
usage() { sed -n '2,/^$/{/^#/!d;s/^# \{0,1\}//;p}' "$0"; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --articles) [[ $# -ge 2 ]] || die "--articles needs a file"; ARTICLES="$2"; shift 2 ;;
        --articles=*) ARTICLES="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ -f "$ARTICLES" && -r "$ARTICLES" ]] || die "--articles: cannot read '$ARTICLES'"
ARTICLES="$(cd "$(dirname "$ARTICLES")" && pwd)/$(basename "$ARTICLES")"
cd "$ROOT"
started=$SECONDS

# ------------------------------------------------------------------------- stop what we start

WORK=""
BROKER_STATE=""
SERVICE_PID=""
RESULTS_PID=""

stop_service() {
    [[ -n "$SERVICE_PID" ]] || return 0
    local pid="$SERVICE_PID" i t0=$SECONDS
    SERVICE_PID=""
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for (( i = 0; i < 400; i++ )); do          # it drains and commits: seconds, 40 s at most
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "service pid $pid still running 40 s after SIGTERM: SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    local status=0
    wait "$pid" 2>/dev/null || status=$?
    echo "newsdedup run stopped by SIGTERM: exit $status after $(( SECONDS - t0 )) s"
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    set +e
    if [[ -n "$RESULTS_PID" ]]; then
        kill -TERM "$RESULTS_PID" 2>/dev/null
        wait "$RESULTS_PID" 2>/dev/null
    fi
    stop_service
    if [[ -n "$BROKER_STATE" ]]; then
        bash "$ROOT/scripts/broker.sh" stop --state-dir "$BROKER_STATE" 2>/dev/null
        echo "broker stopped"
    fi
    [[ -n "$WORK" ]] && rm -rf "$WORK"
    if [[ $status -ne 0 ]]; then
        echo "$PROG: stopped (exit $status); everything it started is stopped" >&2
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ------------------------------------------------------------------------- prerequisites

say "build prerequisites (scripts/setup.sh)"
rust_min="$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml)"
[[ -f "$HOME/.cargo/env" ]] && ! command -v cargo >/dev/null 2>&1 && . "$HOME/.cargo/env"
rust_ok() {
    local have
    have="$(rustc --version 2>/dev/null | awk '{ print $2 }')" || return 1
    [[ -n "$have" ]] && [[ "$(printf '%s\n%s\n' "$rust_min" "$have" | sort -V | head -n1)" == "$rust_min" ]]
}
if command -v cargo >/dev/null 2>&1 && rust_ok; then
    bash "$ROOT/scripts/setup.sh"
else
    # setup.sh installs the Debian packages (curl among them) before it reports the missing
    # Rust, which is installed next; its second run checks that nothing is missing any more.
    bash "$ROOT/scripts/setup.sh" || true
    if command -v rustup >/dev/null 2>&1; then
        echo "Rust >= $rust_min needed: rustup toolchain install stable"
        rustup toolchain install stable --profile minimal
        export RUSTUP_TOOLCHAIN=stable
    else
        echo "Rust >= $rust_min needed: installing it with rustup (https://rustup.rs) into ~/.cargo"
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
            sh -s -- -y --profile minimal --default-toolchain stable
        . "$HOME/.cargo/env"
    fi
    rust_ok || die "Rust >= $rust_min is still missing ($(rustc --version 2>&1))"
    bash "$ROOT/scripts/setup.sh"
fi

say "building newsdedup and the producer (cargo build --release)"
echo "The first build takes ~30 minutes on 2 cores (RocksDB and librdkafka are compiled from"
echo "source); later builds take seconds."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/newsdedup/target}"
t0=$SECONDS
cargo build --release --bin newsdedup --example kafka_load
build_s=$(( SECONDS - t0 ))
BIN="$CARGO_TARGET_DIR/release/newsdedup"
LOAD="$CARGO_TARGET_DIR/release/examples/kafka_load"

# ------------------------------------------------------------------------- broker and topics

WORK="$(mktemp -d "${TMPDIR:-/tmp}/newsdedup-demo.XXXXXX")"
run_t0=$SECONDS
say "local broker (scripts/broker.sh: Tansu, in memory)"
BROKER_STATE="$WORK/broker"
BROKERS="$(bash scripts/broker.sh start --state-dir "$BROKER_STATE" | tail -n1)"
# One input partition: the service then decides the records in the file's order, the order
# `newsdedup batch` would use (with several, a repost and its original may be decided in either
# order, and whichever comes first is the unique one).
bash scripts/broker.sh create-topics --state-dir "$BROKER_STATE" \
    articles.raw:1 articles.unique:1 articles.duplicate:1 articles.dlq:1 articles.corrections:1

# ------------------------------------------------------------------------- the service

say "newsdedup run"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
# The three -X settings make Tansu's group join take ~3 s instead of ~23 s; the rebalance drain
# limit must stay below max.poll.interval.ms.
"$BIN" run --brokers "$BROKERS" --index-dir "$WORK/index" --metrics-addr "127.0.0.1:$port" \
    -X session.timeout.ms=6000 -X heartbeat.interval.ms=500 -X max.poll.interval.ms=10000 \
    --rebalance-timeout-ms 5000 >"$WORK/service.log" 2>&1 &
SERVICE_PID=$!
echo "service pid $SERVICE_PID, brokers $BROKERS"
echo "metrics: http://127.0.0.1:$port/metrics while it runs (also /health, /ready)"

say "producing $(basename "$ARTICLES") to articles.raw"
produced="$("$LOAD" produce --brokers "$BROKERS" --topic articles.raw --input "$ARTICLES")"
echo "$produced"
expect="$(sed -n 's/.*"produced":\([0-9]*\).*/\1/p' <<<"$produced")"
[[ "$expect" =~ ^[1-9][0-9]*$ ]] || die "nothing produced from $ARTICLES"

say "waiting until each of the $expect records has an output"
"$LOAD" results --brokers "$BROKERS" --expect "$expect" --idle-timeout 120 \
    >"$WORK/results.txt" 2>"$WORK/results.err" &
RESULTS_PID=$!
while kill -0 "$RESULTS_PID" 2>/dev/null; do
    if ! kill -0 "$SERVICE_PID" 2>/dev/null; then
        echo "the service exited early; last lines of its log:" >&2
        tail -n 30 "$WORK/service.log" >&2
        exit 1
    fi
    sleep 0.5
done
results_status=0
wait "$RESULTS_PID" || results_status=$?
RESULTS_PID=""
if [[ $results_status -ne 0 ]]; then
    cat "$WORK/results.txt" "$WORK/results.err" >&2
    echo "last lines of the service log:" >&2
    tail -n 30 "$WORK/service.log" >&2
    die "not every record got an output"
fi
decided_s=$(( SECONDS - run_t0 ))
metrics="$(curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null |
    grep -E '^newsdedup_articles_(consumed|unique|duplicate|invalid)_total' || true)"

say "stopping"
stop_service
bash scripts/broker.sh stop --state-dir "$BROKER_STATE" 2>/dev/null
BROKER_STATE=""
echo "broker stopped"

say "result"
cat "$WORK/results.txt"
if [[ -n "$metrics" ]]; then
    echo
    echo "the service's own counters (/metrics):"
    sed 's/^/  /' <<<"$metrics"
fi
echo
echo "timings: build ${build_s} s; broker start to every record decided ${decided_s} s; total $(( SECONDS - started )) s"
