#!/usr/bin/env bash
# The project's test command (README "Try it"): formatting, lints, and every test in release mode
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
# and run by hand (docs/PERFORMANCE.md), never as timed tests.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --release -- --test-threads 2 2>&1 | tee "$log" || status=$?
# The container image, built from the binary just tested and run against a test broker (installs
# podman; says SKIPPED and why where podman cannot run a container; ~2 minutes, ~4 the first time).
image="skipped (NEWSDEDUP_SKIP_IMAGE_TEST is set)"
if [[ -z "${NEWSDEDUP_SKIP_IMAGE_TEST:-}" ]]; then
  image_log=$(mktemp)
  trap 'rm -f "$log" "$image_log"' EXIT
  if bash scripts/image_test.sh 2>&1 | tee "$image_log"; then
    image="passed"
    grep -q 'SKIPPED' "$image_log" && image="$(grep -m1 'SKIPPED' "$image_log")"
  else
    image="FAILED"
    status=1
  fi
fi
# One closing line over every test binary (the last binary cargo runs, the doc-tests, has none).
awk '/^test result:/ { p += $4; f += $6 } END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
echo "image test (scripts/image_test.sh): $image"
exit "$status"
