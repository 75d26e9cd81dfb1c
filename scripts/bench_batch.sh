#!/usr/bin/env bash
# End-to-end `newsdedup batch` throughput on the shared corpus (all four files, 28k articles),
# fresh index, all cores, against the goal's yardstick: raw jieba-rs cut on one core over the same
# articles.
#
#   bash scripts/bench_batch.sh [--repeat N]
#
# This VM's speed drifts by 20-40% within minutes, so every round measures raw cut right before
# and right after the batch run and divides by their mean; the closing line gives the median of
# the rounds' ratios. Each round prints the batch summary line (articles/s, MB/s) and both cut
# figures.
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
cargo bench --quiet --no-run --bench throughput 2>/dev/null
bin="$CARGO_TARGET_DIR/release/newsdedup"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat "$corpus"/peoples_daily_2019_2020.jsonl "$corpus"/sina_2018_patrick233.jsonl \
    "$corpus"/bdci2019_inews.jsonl "$corpus"/sogou_smarty_2008_2012.jsonl > "$work/in.jsonl"
echo "input: $(wc -l < "$work/in.jsonl") articles, $(du -h "$work/in.jsonl" | cut -f1)" >&2

# Raw cut, one core, over the same corpus: prints articles/s.
raw_cut() {
  NEWSDEDUP_BENCH_ONLY=cut NEWSDEDUP_BENCH_ROUNDS=1 cargo bench --quiet --bench throughput 2>/dev/null \
    | awk '/raw jieba/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "articles/s") { print $i; exit } }'
}

ratios=()
for i in $(seq "$repeat"); do
  before=$(raw_cut)
  rm -rf "$work/index"
  summary=$("$bin" batch --quiet --input "$work/in.jsonl" --output /dev/null --index-dir "$work/index" 2>&1 \
    | grep 'batch: done')
  after=$(raw_cut)
  rate=$(sed -E 's/.*"articles_per_sec":([0-9.]+).*/\1/' <<< "$summary")
  ratio=$(awk -v r="$rate" -v a="$before" -v b="$after" 'BEGIN { printf "%.2f", r / ((a + b) / 2) }')
  ratios+=("$ratio")
  echo "round $i: $summary"
  echo "round $i: raw cut ${before} / ${after} articles/s (before / after); batch / raw cut = ${ratio}"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ r[NR] = $1 } END {
  m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
  printf "batch / raw cut over %d rounds: median %.2f (min %.2f, max %.2f)\n", NR, m, r[1], r[NR] }'
