#!/usr/bin/env bash
# Start-up: whole processes timed side by side, the fingerprint tables built from the resource
# texts (`[image] enabled = false`) against read from the start-up image, alternating A/B runs.
#
#   bash scripts/bench_startup.sh [RUNS]      # default 21 runs of each
#
# Measured: `fingerprint` of one article (process start, tables, one fingerprint, exit),
# `batch` of one article into an existing index (the same plus opening the index, one decision,
# the WAL fsync and closing it), and batch's own `first_decision_ms` (from main() to the first
# decision; exec and dynamic linking before main() not included). Prints the machine, the median
# and p90 of each, and the ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/newsdedup/target}"
runs="${1:-21}"
cargo build --release --quiet --bin newsdedup
bin="$CARGO_TARGET_DIR/release/newsdedup"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -n 1 examples/sample_articles.jsonl > "$work/one.jsonl"
printf '[image]\nenabled = false\n' > "$work/plain.toml"
printf '[image]\ndir = "%s/image"\n' "$work" > "$work/image.toml"
# The first imaged start writes the image; the index exists before timing starts.
"$bin" batch --quiet --config "$work/image.toml" --input "$work/one.jsonl" --output /dev/null \
  --index-dir "$work/index" 2>/dev/null

echo "machine: $(bash scripts/machine.sh)"

ms() { local t0 t1; t0=$(date +%s%N); "$@" > /dev/null 2> "$work/stderr"; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )); }
declare -A samples
for i in $(seq "$runs"); do
  for side in plain image; do
    samples[fingerprint-$side]+="$(ms "$bin" fingerprint --config "$work/$side.toml" --input "$work/one.jsonl") "
    samples[batch-$side]+="$(ms "$bin" batch --quiet --config "$work/$side.toml" --input "$work/one.jsonl" \
      --output /dev/null --index-dir "$work/index") "
    # batch's own figure: from main() to its first decision, in microseconds like the others.
    first=$(sed -nE 's/.*"first_decision_ms":([0-9.]+).*/\1/p' "$work/stderr")
    samples[first-$side]+="$(awk -v f="$first" 'BEGIN { printf "%d", f * 1000 }') "
  done
done
stat() { tr ' ' '\n' <<< "$1" | grep . | sort -n | awk '{ v[NR] = $1 } END {
  printf "%.1f %.1f", v[int((NR + 1) / 2)] / 1000, v[int(NR * 0.9 + 0.5)] / 1000 }'; }
for what in fingerprint batch first; do
  read -r pm p9 <<< "$(stat "${samples[$what-plain]}")"
  read -r im i9 <<< "$(stat "${samples[$what-image]}")"
  awk -v w="$what" -v pm="$pm" -v p9="$p9" -v im="$im" -v i9="$i9" -v n="$runs" 'BEGIN {
    if (w == "first") w = "batch, main() to its first decision"; else w = w " of one article"
    printf "%-37s: tables from the texts %6.1f ms (p90 %6.1f), from the image %6.1f ms (p90 %6.1f): %.1fx faster (%d runs each)\n", w, pm, p9, im, i9, pm / im, n }'
done
