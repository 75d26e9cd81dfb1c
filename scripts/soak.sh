#!/usr/bin/env bash
# scripts/soak.sh — the soak of `newsdedup run` under faults (issue 52): builds the release binary
# unless --no-build comes first, then runs scripts/soak.py with the other arguments, e.g.
#   scripts/soak.sh --duration 20m      # a fault every 30 s, then the checks and a summary
#   scripts/soak.sh --ci                # two minutes, a fault every 15 s
# scripts/soak.py installs confluent-kafka (PyPI) into a venv under $NEWSDEDUP_CACHE on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/newsdedup/target}"
if [[ "${1:-}" == "--no-build" ]]; then
    shift
else
    cargo build --release --bin newsdedup >&2
fi
exec "${PYTHON:-python3}" scripts/soak.py "$@"
