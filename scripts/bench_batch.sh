#!/usr/bin/env bash
# End-to-end `newsdedup batch` against the goal's yardstick, both timed as whole processes over the
# same articles (the shared corpus, all four files, 28k articles): a raw jieba-rs cut on one thread
# (examples/raw_cut.rs: read the JSONL, load the crates.io jieba-rs with newsdedup's dictionary,
# cut every title and content) and `newsdedup batch` (all cores, a fresh index, start-up
# included).
#
#   bash scripts/bench_batch.sh [--repeat N]
#
# This VM's speed drifts by 20-40% within minutes, so every round times raw_cut right before and
# right after the batch run and divides their mean by batch's wall time; the closing line gives the
# median of the rounds' ratios. The first line names the machine (CPU model, cores, caches); each
# round prints the batch summary line (its own articles/s counts from its first decision) and how
# many memtable flushes RocksDB ran during the run (none over the corpus: its families' memtables
# do not fill, and the band entries go to the index as files). A change that makes a flush fall
# inside the run, or a band file more or less, moves this figure without a change per article:
# measure such a change on a longer stream too.
#
# The corpus is read from ../shared/data/corpus (NEWSDEDUP_CORPUS_DIR) into a temporary file
# outside the repository; nothing is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/newsdedup/target}"
corpus="${NEWSDEDUP_CORPUS_DIR:-$(cd .. && pwd)/shared/data/corpus}"
repeat=1
[ "${1:-}" = "--repeat" ] && repeat="${2:-1}"

cargo build --release --quiet --bin newsdedup --example raw_cut
bin="$CARGO_TARGET_DIR/release/newsdedup"
raw_cut="$CARGO_TARGET_DIR/release/examples/raw_cut"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat "$corpus"/peoples_daily_2019_2020.jsonl "$corpus"/sina_2018_patrick233.jsonl \
    "$corpus"/bdci2019_inews.jsonl "$corpus"/sogou_smarty_2008_2012.jsonl > "$work/in.jsonl"

echo "machine: $(bash scripts/machine.sh)"
echo "input: $(wc -l < "$work/in.jsonl") articles, $(du -h "$work/in.jsonl" | cut -f1)"

# Wall seconds of a command (its output discarded; a failure stops the script).
wall() {
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null 2>> "$work/stderr" || { cat "$work/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f", e - s }'
}

ratios=()
for i in $(seq "$repeat"); do
  before=$(wall "$raw_cut" "$work/in.jsonl")
  rm -rf "$work/index"
  : > "$work/stderr"
  batch=$(wall "$bin" batch --quiet --input "$work/in.jsonl" --output /dev/null --index-dir "$work/index")
  summary=$(grep 'batch: done' "$work/stderr")
  flushes=$(grep -c '"event": "flush_finished"' "$work/index/LOG" || true)
  after=$(wall "$raw_cut" "$work/in.jsonl")
  ratio=$(awk -v b="$batch" -v x="$before" -v y="$after" 'BEGIN { printf "%.2f", (x + y) / 2 / b }')
  ratios+=("$ratio")
  echo "round $i: $summary"
  echo "round $i: raw cut ${before} s / ${after} s (before / after), batch ${batch} s (${flushes} memtable flushes); batch / raw cut = ${ratio}"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ r[NR] = $1 } END {
  m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
  printf "batch / raw cut (whole processes) over %d rounds: median %.2f (min %.2f, max %.2f)\n", NR, m, r[1], r[NR] }'
