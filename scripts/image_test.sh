#!/usr/bin/env bash
# scripts/image_test.sh — builds the container image (docker/Dockerfile) from the binary the tests
# built and runs it against the local test broker, with podman, without any registry.
#
# Usage:
#   scripts/image_test.sh [--keep-image]
#
# 1. Builds (cargo, a no-op after the tests) the release binary and the producer
#    (examples/kafka_load.rs), and splits the binary's debug information off as it is shipped
#    (scripts/split_debug.sh; the binary must stay <= 40 MB).
# 2. Base image: Debian bookworm from Debian packages (debootstrap --variant=minbase from the
#    Debian mirror apt already uses on this machine), trimmed as Debian's slim image is (apt
#    lists and caches, documentation, man pages, locales), imported with `podman import`. Cached:
#    the root file system's tar under $NEWSDEDUP_CACHE/image-base, the image in podman's storage.
# 3. The image: docker/Dockerfile's `prebuilt` target (the runtime stage with that binary) over
#    the base, apt inside the build reading the same mirror. The image may add at most 60 MB to
#    its base.
# 4. Runs it (--network host, against scripts/broker.sh's broker) and checks: `--version`; `run`
#    with the image's configuration and environment (only the broker address and the settings
#    that make the test broker's group join quick are given) decides every sample record
#    (examples/sample_articles.jsonl); /health and /ready answer 200; the image's HEALTHCHECK
#    passes (`podman healthcheck run`); the service runs as its own user, not root, and cannot
#    write its config file; `index stats` in the image finds the index on the volume by the
#    image's environment; `podman stop` ends it with exit status 0 within the stop grace (60 s);
#    started again on the same volume with NEWSDEDUP_METRICS_ADDR moving the metrics port, it
#    resumes once the group has settled (assigned, /ready) without deciding any record twice,
#    decides new records against the index it kept (a copy of a sample article is a duplicate),
#    and its HEALTHCHECK follows the moved port.
# Prints the image's size, its base's and what it adds, and the shipped binary's size.
#
# Installs what it needs with apt (podman, runc, debootstrap, curl). Exits 0 without testing,
# saying why, only when podman cannot run a container on this machine. Everything it starts is
# removed at the end (containers, volume, broker, the test image unless --keep-image); the base
# stays cached.
#
# Environment: CARGO_TARGET_DIR (default $HOME/.cache/newsdedup/target), NEWSDEDUP_CACHE (default
# $HOME/.cache/newsdedup), NEWSDEDUP_DEBIAN_MIRROR (a Debian mirror URL, when apt's sources on
# this machine have none for bookworm).
#
# podman runs with `--runtime runc` (crun fails on kernels with cgroup v1 like these machines')
# and containers with `--ulimit nofile=20000:20000 --ulimit nproc=32768:32768` (a sandbox may
# not raise limits beyond what it has). No systemd here: podman's timer for periodic health
# checks does not run, so they are run by hand (`podman healthcheck run`).

set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PROG="$(basename "$0")"
KEEP_IMAGE=0

say() { printf '\n== %s\n' "$*"; }
die() { printf '%s: error: %s\n' "$PROG" "$*" >&2; exit 1; }
usage() { sed -n '2,/^$/{/^#/!d;s/^# \{0,1\}//;p}' "$0"; }

while [[ $# -gt 0 ]]; do
    case "$1" in
        --keep-image) KEEP_IMAGE=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
cd "$ROOT"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/newsdedup/target}"
CACHE_ROOT="${NEWSDEDUP_CACHE:-${HOME:-/tmp}/.cache/newsdedup}"
SUITE=bookworm
# Bump when the base's recipe (make_base) changes: the cached base is then built again.
BASE_RECIPE=1
ARCH="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
BASE_TAR="$CACHE_ROOT/image-base/$SUITE-minbase-slim-$ARCH-r$BASE_RECIPE.tar"
BASE_IMAGE="localhost/newsdedup-base:$SUITE-r$BASE_RECIPE"
IMAGE="localhost/newsdedup:image-test"
RUN_OPTS=(--ulimit nofile=20000:20000 --ulimit nproc=32768:32768)
STOP_GRACE=60
MB=1000000
MAX_BINARY_MB=40
MAX_ADDED_MB=60

SUDO=""
[[ "$(id -u)" -eq 0 ]] || SUDO="sudo"
# Without systemd, podman says on every start and stop of a container with a HEALTHCHECK that it
# cannot set up the timer of the periodic checks: expected here, left out of the output.
pm() {
    podman --runtime runc "$@" 2> >(grep -v 'unable to get systemd connection' >&2)
}
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1000000 }'; }

# ------------------------------------------------------------------------- stop what we start

WORK=""
BROKER_STATE=""
CONTAINERS=()
VOLUME=""

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    set +e
    local c
    for c in "${CONTAINERS[@]}"; do
        pm rm -f -t 0 "$c" >/dev/null 2>&1
    done
    [[ -n "$VOLUME" ]] && pm volume rm -f "$VOLUME" >/dev/null 2>&1
    if [[ -n "$BROKER_STATE" ]]; then
        bash "$ROOT/scripts/broker.sh" stop --state-dir "$BROKER_STATE" >/dev/null 2>&1
    fi
    if (( ! KEEP_IMAGE )) && command -v podman >/dev/null 2>&1; then
        pm rmi -f "$IMAGE" >/dev/null 2>&1
    fi
    [[ -n "$WORK" ]] && $SUDO rm -rf "$WORK"
    if [[ $status -ne 0 ]]; then
        echo "$PROG: FAILED (exit $status); everything it started is removed" >&2
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

skip() {
    printf '%s: SKIPPED, the image was not tested: %s\n' "$PROG" "$*" >&2
    exit 0
}

# ------------------------------------------------------------------------- tools

say "tools (podman, runc, debootstrap, curl)"
need=()
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || need+=(runc)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v objcopy >/dev/null 2>&1 || need+=(binutils)
if [[ ${#need[@]} -gt 0 ]]; then
    echo "installing ${need[*]} with apt"
    if ! { $SUDO apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
            "${need[@]}" >/dev/null; }; then
        command -v podman >/dev/null 2>&1 ||
            skip "podman is not installed and apt could not install it (apt-get install podman runc debootstrap)"
        die "apt could not install ${need[*]}: install them, then run this again"
    fi
fi
podman --version

# ------------------------------------------------------------------------- the binary

say "the binary (cargo build --release) and its shipped form (scripts/split_debug.sh)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/newsdedup-image.XXXXXX")"
cargo build --release --bin newsdedup --example kafka_load
# Copied at once: the target directory may be shared with another checkout.
mkdir -p "$WORK/bin" "$WORK/context/config"
cp "$CARGO_TARGET_DIR/release/newsdedup" "$WORK/bin/newsdedup"
cp "$CARGO_TARGET_DIR/release/examples/kafka_load" "$WORK/bin/kafka_load"
LOAD="$WORK/bin/kafka_load"
bash scripts/split_debug.sh "$WORK/bin/newsdedup" "$WORK/context"
cp config/default.toml "$WORK/context/config/default.toml"
built_bytes=$(stat -c %s "$WORK/bin/newsdedup")
binary_bytes=$(stat -c %s "$WORK/context/newsdedup")
debug_bytes=$(stat -c %s "$WORK/context/newsdedup.debug")
rm "$WORK/context/newsdedup.debug"
echo "built $(mb "$built_bytes"); shipped $(mb "$binary_bytes") + debug information $(mb "$debug_bytes")"
(( binary_bytes <= MAX_BINARY_MB * MB )) ||
    die "the shipped binary is $(mb "$binary_bytes"), more than $MAX_BINARY_MB MB"

# ------------------------------------------------------------------------- the base image

# The Debian archives apt uses here for $SUITE (bookworm, -updates, -security): "URI SUITE" lines.
debian_sources() {
    apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(ORIGIN) $(CODENAME)' 'Created-By: Packages' \
        2>/dev/null | awk -v s="$SUITE" '$3 == "Debian" && ($4 == s || index($4, s "-") == 1) { print $1, $2 }' | sort -u
}

if [[ -n "${NEWSDEDUP_DEBIAN_MIRROR:-}" ]]; then
    SOURCES="${NEWSDEDUP_DEBIAN_MIRROR%/}/ $SUITE"$'\n'"${NEWSDEDUP_DEBIAN_MIRROR%/}/ $SUITE-updates"
else
    SOURCES="$(debian_sources)"
    if [[ -z "$SOURCES" ]]; then
        $SUDO apt-get update -qq || true
        SOURCES="$(debian_sources)"
    fi
fi
MIRROR="$(awk -v s="$SUITE" '$2 == s { print $1; exit }' <<<"$SOURCES")"
[[ -n "$MIRROR" ]] ||
    die "apt's sources on this machine have no Debian $SUITE archive to build the base from: set NEWSDEDUP_DEBIAN_MIRROR=http://<a Debian mirror>/debian and run this again"
# The same archives for apt inside the build (mounted read-only; never part of the image).
mkdir -p "$WORK/apt-sources"
while read -r uri suite; do
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' \
        "$uri" "$suite"
done <<<"$SOURCES" >"$WORK/apt-sources/debian.sources"

# debootstrap, then what Debian's slim images leave out (debuerreotype's "slimify"), with dpkg
# told to leave it out of later installs too.
make_base() {
    local rootfs="$WORK/rootfs"
    echo "debootstrap --variant=minbase $SUITE from $MIRROR (about a minute)"
    $SUDO debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 || {
        tail -n 20 "$WORK/debootstrap.log" >&2
        die "debootstrap failed (log above): check that $MIRROR answers"
    }
    $SUDO tee "$rootfs/etc/dpkg/dpkg.cfg.d/slim" >/dev/null <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
    $SUDO tee "$rootfs/etc/apt/apt.conf.d/slim" >/dev/null <<'EOF'
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Install-Recommends "false";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
EOF
    $SUDO find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    $SUDO find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
    $SUDO rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda,locale}/* \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
        "$rootfs"/var/log/apt/* "$rootfs"/var/log/dpkg.log "$rootfs"/var/log/bootstrap.log \
        "$rootfs"/var/log/alternatives.log "$rootfs/etc/apt/sources.list" "$rootfs"/tmp/*
    # No mirror of this machine inside the image: builds mount their sources.
    $SUDO mkdir -p "$(dirname "$BASE_TAR")"
    $SUDO tar --numeric-owner -C "$rootfs" -cf "$BASE_TAR.part" .
    $SUDO mv "$BASE_TAR.part" "$BASE_TAR"
    $SUDO rm -rf "$rootfs"
}

say "base image $BASE_IMAGE (Debian $SUITE minbase, slim)"
if pm image exists "$BASE_IMAGE" 2>/dev/null; then
    echo "cached in podman's storage"
else
    if [[ -s "$BASE_TAR" ]]; then
        echo "from the cached root file system $BASE_TAR"
    else
        make_base
    fi
    pm import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' \
        "$BASE_TAR" "$BASE_IMAGE" >/dev/null ||
        skip "podman cannot import an image here (podman import failed; see its message above)"
fi
if ! probe="$(pm run --rm "${RUN_OPTS[@]}" "$BASE_IMAGE" true 2>&1)"; then
    skip "podman cannot run a container on this machine: $probe"
fi
base_bytes="$(pm image inspect --format '{{.Size}}' "$BASE_IMAGE")"
echo "base: $(mb "$base_bytes")"

# ------------------------------------------------------------------------- the image

say "image $IMAGE (docker/Dockerfile, target prebuilt)"
# Docker format: OCI images have no HEALTHCHECK.
pm build --format docker --target prebuilt \
    --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --volume "$WORK/apt-sources:/etc/apt/sources.list.d:ro" \
    -f docker/Dockerfile -t "$IMAGE" "$WORK/context"
image_bytes="$(pm image inspect --format '{{.Size}}' "$IMAGE")"
added_bytes=$(( image_bytes - base_bytes ))
echo "image: $(mb "$image_bytes") = base $(mb "$base_bytes") + $(mb "$added_bytes") added"
(( added_bytes <= MAX_ADDED_MB * MB )) ||
    die "the image adds $(mb "$added_bytes") to its base, more than $MAX_ADDED_MB MB"
[[ "$(pm image inspect --format '{{.Config.User}}' "$IMAGE")" == newsdedup ]] ||
    die "the image does not run as the user newsdedup"

say "newsdedup --version in the image"
version="$(pm run --rm --no-healthcheck "${RUN_OPTS[@]}" "$IMAGE" --version)"
echo "$version"
[[ "$version" == "newsdedup $(sed -n 's/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -n1)" ]] ||
    die "--version printed '$version'"

# ------------------------------------------------------------------------- broker and topics

say "test broker (scripts/broker.sh) and topics"
BROKER_STATE="$WORK/broker"
BROKERS="$(bash scripts/broker.sh start --state-dir "$BROKER_STATE" | tail -n1)"
# One input partition: the records are decided in the file's order (as scripts/demo.sh does).
bash scripts/broker.sh create-topics --state-dir "$BROKER_STATE" \
    articles.raw:1 articles.unique:1 articles.duplicate:1 articles.dlq:1 articles.corrections:1

# ------------------------------------------------------------------------- run

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
port_free() {
    python3 -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", int(sys.argv[1]))); s.close()' "$1" 2>/dev/null
}
TAG="$$"
VOLUME="newsdedup-image-test-$TAG"
pm volume create "$VOLUME" >/dev/null

# start NAME [podman run options...]: the service in the background, on the volume, with the
# image's configuration; the broker address and the settings that make Tansu's group join take
# ~3 s instead of ~23 s (docs: scripts/broker.sh) are the only additions.
start() {
    local name="$1"
    shift
    CONTAINERS+=("$name")
    pm run -d --name "$name" "${RUN_OPTS[@]}" --network host --stop-timeout "$STOP_GRACE" \
        --volume "$VOLUME:/var/lib/newsdedup" \
        -e "NEWSDEDUP_BROKERS=$BROKERS" \
        -e NEWSDEDUP_KAFKA_SESSION_TIMEOUT_MS=6000 \
        -e NEWSDEDUP_KAFKA_HEARTBEAT_INTERVAL_MS=500 \
        -e NEWSDEDUP_KAFKA_MAX_POLL_INTERVAL_MS=10000 \
        -e NEWSDEDUP_REBALANCE_TIMEOUT_MS=5000 \
        "$@" "$IMAGE" >/dev/null
}

show_logs() {
    echo "last lines of $1's log:" >&2
    pm logs --tail 30 "$1" >&2 || true
}

# metric BASE NAME: the value of a metric without labels (0 when absent).
metric() {
    local text
    text="$(curl -fsS --max-time 5 "$1/metrics" 2>/dev/null)" || text=""
    awk -v n="$2" '$1 == n { v = $2 } END { print v == "" ? 0 : v + 0 }' <<<"$text"
}

# settle NAME BASE: waits (60 s at most) until the container's group has settled: it holds a
# partition and /ready answers 200.
settle() {
    local name="$1" base="$2" i
    for (( i = 0; i < 300; i++ )); do
        if [[ "$(pm inspect --format '{{.State.Running}}' "$name" 2>/dev/null)" != true ]]; then
            show_logs "$name"
            die "$name exited while starting"
        fi
        if [[ "$(metric "$base" newsdedup_assigned_partitions)" -ge 1 ]] &&
            curl -fsS --max-time 2 "$base/ready" >/dev/null 2>&1; then
            echo "$name: partition assigned and /ready 200 after $(( i / 5 )) s"
            return 0
        fi
        sleep 0.2
    done
    show_logs "$name"
    die "$name: no partition assigned or /ready not 200 within 60 s"
}

# wait_for NAME BASE METRIC VALUE: until the metric reaches VALUE (60 s at most).
wait_for() {
    local i v
    for (( i = 0; i < 300; i++ )); do
        v="$(metric "$2" "$3")"
        [[ "$v" -ge "$4" ]] && return 0
        sleep 0.2
    done
    show_logs "$1"
    die "$1: $3 is ${v:-?} after 60 s, expected $4"
}

# check_health NAME BASE: /health and /ready 200 from outside, the image's HEALTHCHECK inside.
check_health() {
    local name="$1" base="$2" path
    for path in /health /ready; do
        curl -fsS --max-time 5 "$base$path" >/dev/null || die "$name: $base$path did not answer 200"
    done
    echo "$name: $base/health and /ready answer 200"
    pm healthcheck run "$name" >/dev/null || {
        pm inspect --format '{{json .State.Health}}' "$name" >&2 || true
        die "$name: the image's HEALTHCHECK fails (podman healthcheck run)"
    }
    echo "$name: HEALTHCHECK (newsdedup health) passes"
}

# stop NAME: podman stop within the stop grace, exit status 0.
stop() {
    local name="$1" t0=$SECONDS status
    pm stop "$name" >/dev/null
    status="$(pm inspect --format '{{.State.ExitCode}}' "$name")"
    echo "$name: podman stop took $(( SECONDS - t0 )) s, exit status $status"
    [[ "$status" == 0 ]] || { show_logs "$name"; die "$name exited with status $status after podman stop"; }
    (( SECONDS - t0 < STOP_GRACE )) || die "$name needed the whole stop grace ($STOP_GRACE s)"
}

# outputs: every record in the three output topics (counted by kafka_load measure, which stops
# after 5 s without news).
outputs() {
    local report
    report="$("$LOAD" measure --brokers "$BROKERS" --expect 1000000 --idle-timeout 5 2>/dev/null || true)"
    python3 -c 'import json,sys; print(json.loads(sys.argv[1])["records"])' "$report"
}

say "newsdedup run in the image, with its default configuration and environment"
first_addr="0.0.0.0:9898"
first_port=9898
if ! port_free 9898; then
    first_port="$(free_port)"
    first_addr="0.0.0.0:$first_port"
    echo "port 9898 is taken on this machine: the first run serves on $first_port (NEWSDEDUP_METRICS_ADDR)"
fi
C1="newsdedup-image-test-$TAG-1"
if [[ "$first_port" == 9898 ]]; then start "$C1"; else start "$C1" -e "NEWSDEDUP_METRICS_ADDR=$first_addr"; fi
B1="http://127.0.0.1:$first_port"
settle "$C1" "$B1"

say "the service's user and its config file"
who="$(pm exec "$C1" sh -c 'id -un; awk "/^Uid:/ { print \$2 }" /proc/1/status; cat /proc/1/comm')"
read -r -d '' user uid comm <<<"$who" || true
echo "pid 1 is $comm, uid $uid; exec runs as $user"
[[ "$comm" == newsdedup && "$uid" != 0 && "$user" == newsdedup ]] ||
    die "the service should run as the user newsdedup, not root (got: $who)"
pm exec "$C1" sh -c 'test -r "$NEWSDEDUP_CONFIG" && ! test -w "$NEWSDEDUP_CONFIG" && ! test -w "$(dirname "$NEWSDEDUP_CONFIG")"' ||
    die "the config file must be readable and not writable by the service's user"
echo "config: $(pm exec "$C1" sh -c 'stat -c "%n %U:%G %A" "$NEWSDEDUP_CONFIG"'), read-only to newsdedup"

say "the sample articles"
produced="$("$LOAD" produce --brokers "$BROKERS" --topic articles.raw --input examples/sample_articles.jsonl)"
echo "$produced"
expect="$(sed -n 's/.*"produced":\([0-9]*\).*/\1/p' <<<"$produced")"
[[ "$expect" =~ ^[1-9][0-9]*$ ]] || die "nothing produced from examples/sample_articles.jsonl"
if ! "$LOAD" results --brokers "$BROKERS" --expect "$expect" --idle-timeout 60 >"$WORK/results.txt"; then
    cat "$WORK/results.txt" >&2
    show_logs "$C1"
    die "not every sample record was decided"
fi
head -n1 "$WORK/results.txt"
wait_for "$C1" "$B1" newsdedup_articles_consumed_total "$expect"
unique="$(metric "$B1" newsdedup_articles_unique_total)"
duplicate="$(metric "$B1" newsdedup_articles_duplicate_total)"
(( duplicate > 0 )) || die "no sample repost was found a duplicate"
check_health "$C1" "$B1"

say "podman stop"
stop "$C1"

say "index stats in the image (the index on the volume, found by NEWSDEDUP_INDEX_DIR)"
stats="$(pm run --rm --no-healthcheck "${RUN_OPTS[@]}" --volume "$VOLUME:/var/lib/newsdedup" "$IMAGE" index stats --json)"
articles="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["articles"])' "$stats")"
echo "index: $articles articles ($unique unique + $duplicate duplicate decided)"
(( articles == unique + duplicate )) || die "the index holds $articles articles, $(( unique + duplicate )) were decided"
before="$(outputs)"
(( before == expect )) || die "$before output records for $expect input records"

say "restart on the same volume, metrics port moved (NEWSDEDUP_METRICS_ADDR)"
moved_port="$(free_port)"
C2="newsdedup-image-test-$TAG-2"
start "$C2" -e "NEWSDEDUP_METRICS_ADDR=127.0.0.1:$moved_port"
B2="http://127.0.0.1:$moved_port"
settle "$C2" "$B2"
check_health "$C2" "$B2"
# Two new records: a copy of a sample article decided before the restart, and one that is not.
python3 - "$WORK/new.jsonl" <<'EOF'
import json, sys
first = json.loads(open("examples/sample_articles.jsonl", encoding="utf-8").readline())
copy = dict(first, id=first["id"] + "-image-test-copy")
new = {"id": "image-test-new", "title": "容器镜像测试",
       "content": "这是一条只为检查服务重启而写的测试记录，它与样例中的任何文章都不相同。"}
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for record in (copy, new):
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
EOF
"$LOAD" produce --brokers "$BROKERS" --topic articles.raw --input "$WORK/new.jsonl" >/dev/null
wait_for "$C2" "$B2" newsdedup_articles_consumed_total 2
after="$(outputs)"
consumed="$(metric "$B2" newsdedup_articles_consumed_total)"
replayed="$(metric "$B2" newsdedup_articles_replayed_total)"
duplicate2="$(metric "$B2" newsdedup_articles_duplicate_total)"
echo "after the restart: $consumed consumed, $replayed decided again, $duplicate2 duplicate; output records $before -> $after"
(( consumed == 2 && replayed == 0 && after == before + 2 )) ||
    die "the restarted service decided records again (consumed $consumed, replayed $replayed, outputs $before -> $after; expected 2, 0, $(( before + 2 )))"
(( duplicate2 == 1 )) || die "the copy of a sample article was not found a duplicate after the restart (index not kept?)"

say "podman stop"
stop "$C2"

say "passed"
echo "image $IMAGE: $(mb "$image_bytes") (base $(mb "$base_bytes") + $(mb "$added_bytes") added); binary $(mb "$binary_bytes") shipped ($(mb "$built_bytes") built); machine: $(bash scripts/machine.sh)"
