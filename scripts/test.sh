#!/usr/bin/env bash
# The project's test command (README "Testing"): formatting, lints, and every test in release mode
# (one RocksDB/librdkafka build serves tests, benches and the binary).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/newsdedup/target}"
export NEWSDEDUP_CORPUS_DIR="${NEWSDEDUP_CORPUS_DIR:-$(cd .. && pwd)/shared/data/corpus}"

# Build prerequisites (apt; idempotent, quick when present).
bash scripts/setup.sh

cargo fmt --all -- --check
cargo clippy --release --all-targets -- -D warnings
# The quality harness's own unit tests (synthetic text only, ~2 s).
python3 -m unittest discover -s scripts/eval -p 'test_*.py'
# Monitoring files (promtool config/rules/unit tests, Compose file); installs Debian's prometheus,
# whose server tests/broker/prometheus_scrape.rs runs (that test fails without it).
bash scripts/check_prometheus.sh
# Default targets: lib, bins, integration tests, examples (built); benches are built by clippy above
# and run by hand (README "Performance"), never as timed tests.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --release -- --test-threads 2 2>&1 | tee "$log" || status=$?
# One closing line over every test binary (the last binary cargo runs, the doc-tests, has none).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
