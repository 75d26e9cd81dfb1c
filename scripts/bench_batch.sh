#!/usr/bin/env bash
# End-to-end `newsdedup batch` throughput on the shared corpus (all four files, 28k articles),
# fresh index, all cores. Prints the batch summary line (articles/s, MB/s), then raw jieba-rs cut
# on one core over the same articles right after (the goal's yardstick: this VM's speed drifts, so
# the two are measured back to back each round).
#
#   bash scripts/bench_batch.sh [--repeat N]
#
# The corpus is read from ../shared/data/corpus (NEWSDEDUP_CORPUS_DIR) into a temporary file
# outside the repository; nothing is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/newsdedup/target}"
corpus="${NEWSDEDUP_CORPUS_DIR:-$(cd .. && pwd)/shared/data/corpus}"
repeat=1
[ "${1:-}" = "--repeat" ] && repeat="${2:-1}"

cargo build --release --quiet
bin="$CARGO_TARGET_DIR/release/newsdedup"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat "$corpus"/peoples_daily_2019_2020.jsonl "$corpus"/sina_2018_patrick233.jsonl \
    "$corpus"/bdci2019_inews.jsonl "$corpus"/sogou_smarty_2008_2012.jsonl > "$work/in.jsonl"
echo "input: $(wc -l < "$work/in.jsonl") articles, $(du -h "$work/in.jsonl" | cut -f1)" >&2
for i in $(seq "$repeat"); do
  rm -rf "$work/index"
  "$bin" batch --quiet --input "$work/in.jsonl" --output /dev/null --index-dir "$work/index" 2>&1 | grep 'batch: done'
  NEWSDEDUP_BENCH_ONLY=cut NEWSDEDUP_BENCH_ROUNDS=1 cargo bench --quiet --bench throughput 2>/dev/null | grep 'raw jieba'
done
