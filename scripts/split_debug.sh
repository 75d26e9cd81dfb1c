#!/usr/bin/env bash
# scripts/split_debug.sh — the shipped form of a release binary: the binary without its debug
# information, and that information in a file beside it.
#
# Usage:
#   scripts/split_debug.sh BINARY OUTDIR
#
# Writes OUTDIR/NAME (debug sections removed, the symbol table kept, so that perf, backtraces and
# gdb still name functions) and OUTDIR/NAME.debug (the line tables of Rust and C++ code: file and
# line numbers). NAME carries a .gnu_debuglink to NAME.debug: gdb and perf find it when it sits
# next to the binary, or under /usr/lib/debug/<directory of the binary>/ (also found by the
# binary's build id). The release profile keeps line tables (Cargo.toml), so the binary cargo
# builds under target/ is ~500 MB and complete; benches and perf run that one. Install and ship
# this one (docker/Dockerfile, scripts/image_test.sh; docs/OPERATIONS.md, "Without Docker").
#
# Needs objcopy (Debian: binutils); installs it with apt when missing.
set -euo pipefail

PROG="$(basename "$0")"
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

[[ $# -eq 2 ]] || die "usage: $PROG BINARY OUTDIR (see the comment at the top of $0)"
bin="$1"
out="$2"
[[ -f "$bin" && -r "$bin" ]] || die "cannot read the binary '$bin' (build it first: cargo build --release)"
mkdir -p "$out" || die "cannot create '$out'"
name="$(basename "$bin")"
bin="$(cd "$(dirname "$bin")" && pwd)/$name"
out="$(cd "$out" && pwd)"
[[ "$(dirname "$bin")" != "$out" ]] || die "OUTDIR must not be the binary's own directory"

if ! command -v objcopy >/dev/null 2>&1; then
    echo "$PROG: installing binutils (objcopy)" >&2
    SUDO=""
    [[ "$(id -u)" -eq 0 ]] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends binutils >/dev/null ||
        die "objcopy is missing and apt could not install binutils: install binutils, then run this again"
fi

debug="$out/$name.debug"
stripped="$out/$name"
rm -f "$debug" "$stripped"
objcopy --only-keep-debug "$bin" "$debug"
# The debuglink names the file and holds its CRC; objcopy resolves it in the working directory.
(
    cd "$out"
    objcopy --strip-debug --add-gnu-debuglink="$name.debug" "$bin" "$name"
)
chmod 0755 "$stripped"
chmod 0644 "$debug"
echo "$PROG: $stripped $(stat -c %s "$stripped") bytes (symbols, no debug info), $debug $(stat -c %s "$debug") bytes" >&2
