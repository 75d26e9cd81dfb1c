#!/usr/bin/env bash
# Renders an audit report (newsdedup audit --html FILE) to a PNG with headless Chromium, to look
# at it without a browser. Installs Debian's chromium and a CJK font (fonts-noto-cjk) when
# missing (apt-get, as root or with sudo). The page is opened from disk with networking
# components off; the report itself needs nothing from the network.
#
# Usage: scripts/audit_screenshot.sh REPORT.html [OUT.png] [WIDTHxHEIGHT]
#   OUT.png defaults to REPORT.png next to the report; the window is 1280x2400 by default
#   (the screenshot is the top of the page at that size).
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
report="$1"
out="${2:-${report%.html}.png}"
size="${3:-1280x2400}"
[ -f "$report" ] || { echo "audit_screenshot: no such file: $report" >&2; exit 1; }
case "$size" in
  *x*) window="${size%x*},${size#*x}" ;;
  *) echo "audit_screenshot: size must be WIDTHxHEIGHT, got $size" >&2; exit 2 ;;
esac

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
dpkg -s fonts-noto-cjk >/dev/null 2>&1 || need+=(fonts-noto-cjk)
if [ ${#need[@]} -gt 0 ]; then
  echo "audit_screenshot: installing ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# file:// URL of the report, percent-encoded byte by byte (spaces, '#', CJK in the path).
urlencode() {
  local LC_ALL=C s="$1" out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c="${s:i:1}"
    case "$c" in
      [a-zA-Z0-9/._~-]) out+="$c" ;;
      *) out+=$(printf '%%%02X' "'$c") ;;
    esac
  done
  printf '%s' "$out"
}
abs="$(cd "$(dirname "$report")" && pwd)/$(basename "$report")"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
# Chromium prints harmless D-Bus and GPU warnings on a headless server; keep them out of sight
# unless it fails.
if ! chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --user-data-dir="$profile" --screenshot="$out" \
    --window-size="$window" "file://$(urlencode "$abs")" >"$profile/log" 2>&1; then
  cat "$profile/log" >&2
  echo "audit_screenshot: chromium failed" >&2
  exit 1
fi
[ -s "$out" ] || { cat "$profile/log" >&2; echo "audit_screenshot: no screenshot written" >&2; exit 1; }
echo "$out"
