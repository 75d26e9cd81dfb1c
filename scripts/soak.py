#!/usr/bin/env python3
"""A soak of `newsdedup run` under faults: issue 52 item 4, as a tool.

    scripts/soak.py --duration 60m            # the hour of faults
    scripts/soak.py --ci                      # the 2-minute version (faults every 15 s)

It starts a local broker (scripts/broker.sh: Tansu, memory storage) advertised through a TCP
proxy of its own, a 4-partition input, a producer at 100 articles/s (the shared corpus at
../shared/data/corpus, else examples/sample_articles.jsonl, cycled under fresh ids, so later
rounds are duplicates of earlier ones), and one `newsdedup run` through the proxy with
`--exclusive-grace-ms 10000 -X session.timeout.ms=6000 -X heartbeat.interval.ms=500`. Every
`--fault-every` seconds (30; at least 5 s after the previous fault ended, and a fault that stops
the service, kill9 / term / correction, never within 30 s of a restart: on Tansu a SIGTERM a few
seconds after a restart that followed a kill -9 wedged the group) the next fault in turn:

Every `--hostile-every` (50th) record is a hostile one instead (an unclosed-comment bomb, bytes
that are not UTF-8, 20,000 empty headers, an over-long id, deep nesting, a 600 KB title, in
turn): each must get its one output like any other record.

    kill9       kill -9, restart at once
    cut         the proxy drops every connection and refuses new ones for 10 s
    freeze      SIGSTOP for 10 s (beyond the 6 s session timeout), then SIGCONT
    newcomer    a second `run` (own index, same group) joins; it must step down, deciding nothing
    idle        200 idle sockets on the metrics port for 10 s
    term        SIGTERM (clean stop within the shutdown timeout), restart
    correction  `newsdedup correct release` of a duplicate decided in the
                last minute (`--since` two minutes ago), the service killed 0.3 s later: the
                correction is in flight

Should the service exit by itself (e.g. stepping down), the tool records it and restarts it.

Throughout it probes /health (every 0.5 s, 1 s timeout), samples /metrics, the group's committed
offsets and the service's RSS. At the end it stops producing, waits for the service to decide
everything (bounded), stops it and checks:

    nothing lost         every input record has an output (source partition/offset headers)
    no decision changed  a record decided several times (after kill -9) got the same decision
                         and match every time
    all decided          ... by the end of the drain; the backlog never stayed stuck
    recovers             after every fault the backlog was worked off (no silent slowdown)
    memory flat          the service's RSS in the last third is not far above the first third
    health answers       /health answered within 1 s whenever the process was alive (poll()),
                         up and running (not frozen, not before a restart's first answer)
    503 when stuck       whenever records waited while the group's committed offsets stood
                         still, the answering process had been up for longer than the service's
                         limit (--progress-timeout-ms) within that (its clock starts at its own
                         start), and the broker was reachable, /health said 503; except while it
                         waits for another instance to leave a Stable group (kept 200 on purpose)
    newcomers            no newcomer decided anything (its index is empty); one that never got in
                         (never assigned, killed after 90 s) is counted as "group never settled"
    corrections          every correction produced was applied
    no unexpected exit   the service never exited but when the tool stopped it (time, exit
                         code and last log line are recorded)

Broker wedge: /health bodies saying "holding no partition ... the group is Unknown with N
member(s)" while records wait, for more than 2 minutes (restarts in between included), make a
"broker group wedged" window (Tansu: only a new broker helps). When every failed check failed
only inside such windows (a fault's recovery: while the backlog the wedge left was worked off),
the run is INCONCLUSIVE (broker), exit status 3; lost or changed decisions, memory, a newcomer
that decided and the final stop are never put down to the broker.

It prints a summary (and writes SOAK_DIR/summary.json, SOAK_DIR/samples.json); exit status 0 when
every check passed, 3 when inconclusive (broker), else 1.
It installs what it needs: confluent-kafka (PyPI) in a venv under $NEWSDEDUP_CACHE.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("NEWSDEDUP_CACHE", Path.home() / ".cache" / "newsdedup"))
VENV = CACHE / "soak-venv"
CONFLUENT = "confluent-kafka==2.16.1"


def ensure_client() -> None:
    """Re-executes this script in a venv holding confluent-kafka when it is not importable."""
    try:
        import confluent_kafka  # noqa: F401

        return
    except ImportError:
        pass
    if os.environ.get("NEWSDEDUP_SOAK_VENV") == "1":
        sys.exit("soak: confluent-kafka is still missing in the venv; see the pip output above")
    py = VENV / "bin" / "python"
    if not py.exists():
        print(f"soak: installing {CONFLUENT} into {VENV}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", CONFLUENT], check=True)
    env = dict(os.environ, NEWSDEDUP_SOAK_VENV="1")
    os.execve(str(py), [str(py), __file__, *sys.argv[1:]], env)


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} soak: {msg}", file=sys.stderr, flush=True)


def parse_duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(s|m|h)?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 20m, 1h)")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------------------------
# The proxy between every client and the broker (the broker advertises it).


class CutProxy:
    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.listener.settimeout(0.2)
        self.addr = "127.0.0.1:%d" % self.listener.getsockname()[1]
        self.upstream: tuple[str, int] | None = None
        self.cut_now = False
        self.stopped = False
        self.lock = threading.Lock()
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True, name="proxy").start()

    def forward_to(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.upstream = (host, int(port))

    def cut(self) -> None:
        self.cut_now = True
        with self.lock:
            for s in self.open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.open.clear()

    def restore(self) -> None:
        self.cut_now = False

    def stop(self) -> None:
        self.stopped = True
        self.cut()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if self.cut_now or self.upstream is None:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.open += [client, server]
            threading.Thread(target=self._pipe, args=(client, server), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self.lock:
            for s in (a, b):
                if s in self.open:
                    self.open.remove(s)
                    s.close()


# ---------------------------------------------------------------------------------------------
# HTTP


def http_get(addr: str, path: str, timeout: float) -> tuple[int, str, float] | None:
    """(status, body, seconds) or None when nothing answered within `timeout`."""
    start = time.monotonic()
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.settimeout(max(0.01, timeout - (time.monotonic() - start)))
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n".encode())
            buf = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
                if time.monotonic() - start > timeout:
                    return None
    except OSError:
        return None
    text = buf.decode("utf-8", "replace")
    parts = text.split(None, 2)
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    body = text.split("\r\n\r\n", 1)[1] if "\r\n\r\n" in text else ""
    return int(parts[1]), body, time.monotonic() - start


def metric_values(text: str, name: str) -> dict[str, float]:
    """label string -> value for every sample of `name`."""
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            key, _, value = line.rpartition(" ")
            try:
                out[key[len(name):]] = float(value)
            except ValueError:
                pass
    return out


# ---------------------------------------------------------------------------------------------
# Judging (pure functions of what was recorded, so a run's samples.json can be judged again)

RESTART_GAP = 30.0  # s: no kill -9 / SIGTERM / correction (kills) sooner after a restart
STOPPING_FAULTS = ("kill9", "term", "correction")
WEDGE_MIN = 120.0  # s: a group Unknown this long, with records waiting, is a wedged broker
WEDGE_GAP = 30.0  # s: wedged probes this far apart still make one window (restarts between)
WEDGE_MARGIN = 30.0  # s: a failure this soon after a wedge ended still falls in it
ASSIGNED = re.compile(r"partitions \[[^\]]*\] of \S+ assigned")


def fault_due(next_at: float, kind: str, last_restart: float) -> float:
    """When a fault of `kind` may run: at its slot, and a stopping fault not within
    RESTART_GAP s of the service's last restart."""
    return max(next_at, last_restart + RESTART_GAP) if kind in STOPPING_FAULTS else next_at


def last_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            lines = [x for x in f.read().decode("utf-8", "replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def newcomer_outcome(code: int | None, stepped_down: bool, indexed: int | None, assigned: bool) -> str:
    """"decided" (its index holds articles, or cannot be read: the real danger), "stepped down"
    (the rule worked), "group never settled" (never assigned, decided nothing, killed by the tool
    after its timeout: the broker's group did not let it in), else "exited" / "assigned, stayed"
    (decided nothing either way)."""
    if indexed is None or indexed > 0:
        return "decided"
    if code not in (None, 0) and stepped_down:
        return "stepped down"
    if code is None:
        return "assigned, stayed" if assigned else "group never settled"
    return "exited"


def _off(d: dict, p: int) -> int:
    """An offset by partition, with int keys (live) or str keys (samples.json)."""
    return d.get(p, d.get(str(p), 0))


def find_stuck_windows(samples: list[dict], partitions: int, limit: float):
    """Windows (t0, t1) longer than `limit` in which records waited while the group's committed
    offsets stood still (t1: the last sample before they moved); also the backlog series and its
    maximum."""
    stuck_since = None
    still = None
    last_sum = None
    windows = []
    max_lag = 0
    lag_series = []
    for s in samples:
        c = s["committed"]
        if not isinstance(c, dict) or "error" in c:
            continue
        lag = sum(max(0, _off(s["produced_end"], p) - _off(c, p)) for p in range(partitions))
        max_lag = max(max_lag, lag)
        lag_series.append((s["t"], lag))
        total = sum(c.values())
        if lag > 0 and last_sum is not None and total == last_sum:
            stuck_since = stuck_since if stuck_since is not None else s["t"]
            still = s["t"]
        else:
            if stuck_since is not None and still - stuck_since > limit:
                windows.append((stuck_since, still))
            stuck_since = None
        last_sum = total
    if stuck_since is not None and still - stuck_since > limit:
        windows.append((stuck_since, still))
    return windows, lag_series, max_lag


def process_start(p: tuple, starts: list[float]) -> float:
    """The start of the process that answered probe `p` (recorded in it, else the last start)."""
    since = p[3].get("since")
    if isinstance(since, (int, float)):
        return since
    before = [s for s in starts if s <= p[0]]
    return before[-1] if before else 0.0


def others_in_charge(body: dict) -> bool:
    """The member waits for another one to leave while the group is Stable: the service keeps
    /health 200 then on purpose (the one-active-instance rule stops one of the two)."""
    wf = body.get("waiting_for") or ""
    return ("another instance" in wf or "one active instance" in wf) and "the group is Stable" in wf


def judge_503(probes: list, windows: list, starts: list[float], limit: float, slack: float = 15.0):
    """Probes answered 200 (broker up) that should have been 503: in a stuck window, with the
    answering process up for longer than `limit` within it (its clock of waiting starts at its
    own start). Returns (those probes' times, times of the probes exempt as others_in_charge)."""
    unreported, exempt = [], []
    for p in probes:
        if not p[3].get("up") or p[1] != 200 or p[3].get("broker") != "up":
            continue
        for w0, w1 in windows:
            if w0 <= p[0] <= w1 and max(w0, process_start(p, starts)) + limit + slack <= p[0]:
                (exempt if others_in_charge(p[3]) else unreported).append(p[0])
                break
    return unreported, exempt


def wedged(body: dict) -> bool:
    wf = body.get("waiting_for") or ""
    return ("the group is Unknown with" in wf and "records wait" in wf
            and ("holding no partition" in wf or "holding 0 partitions" in wf))


def wedge_windows(probes: list, min_s: float = WEDGE_MIN, gap: float = WEDGE_GAP) -> list[tuple[float, float]]:
    """Windows in which the broker's group sat in state Unknown, this member holding no partition
    while records waited (Tansu: only a new broker helped), for at least `min_s`: restarts in
    between (`gap`) do not end a window; a probe holding partitions does."""
    out: list[tuple[float, float]] = []
    cur = None  # [start, last wedged probe]

    def close():
        if cur and cur[1] - cur[0] >= min_s:
            if out and cur[0] <= out[-1][1]:  # a restart's wait began before the last probe
                out[-1] = (out[-1][0], max(out[-1][1], cur[1]))
            else:
                out.append((cur[0], cur[1]))

    for p in probes:
        body = p[3]
        if p[1] is not None and wedged(body):
            began = p[0] - (body.get("waiting_ms") or 0) / 1000
            if cur and p[0] - cur[1] <= gap:
                cur[1] = p[0]
            else:
                close()
                cur = [began, p[0]]
        elif p[1] is not None and (body.get("assigned_partitions") or 0) > 0:
            close()
            cur = None
    close()
    return out


def wedge_aftermath(wedges: list, lag_series: list, bound: float) -> list[tuple[float, float]]:
    """Each wedge window extended until the backlog it left first fell to `bound` (the recovery
    check's limit): a fault in that time cannot be worked off before the next but one."""
    out = []
    for w0, w1 in wedges:
        after = [t for t, lag in lag_series if t >= w1 and lag <= bound]
        out.append((w0, after[0] if after else end_of(lag_series)))
    return out


def in_windows(span: tuple[float, float], windows: list, margin: float = WEDGE_MARGIN) -> bool:
    """A failure at a time (t, t) falls in a window; a span (recovery after a fault) overlaps one."""
    t0, t1 = span
    for w0, w1 in windows:
        if t0 == t1 and w0 <= t0 <= w1 + margin:
            return True
        if t0 != t1 and t0 <= w1 + margin and t1 >= w0:
            return True
    return False


def verdict(checks: dict, failed_at: dict, wedges: list, windows_of: dict | None = None) -> str:
    """PASSED; INCONCLUSIVE (broker) when every failed check failed only inside wedge windows
    (`windows_of`: other windows for a check); a check without times (lost or changed decisions,
    memory, a newcomer that decided, the final stop) is never excused; else FAILED."""
    failed = [k for k, ok in checks.items() if not ok]
    if not failed:
        return "PASSED"
    windows_of = windows_of or {}
    if wedges and all(failed_at.get(k) and all(in_windows(x, windows_of.get(k, wedges)) for x in failed_at[k])
                      for k in failed):
        return "INCONCLUSIVE (broker)"
    return "FAILED"


# ---------------------------------------------------------------------------------------------
# The service


class Service:
    def __init__(self, soak: "Soak", name: str, index: Path, extra: list[str] | None = None):
        self.soak = soak
        self.name = name
        self.index = index
        self.port = free_port()
        self.metrics = f"127.0.0.1:{self.port}"
        self.log = soak.dir / f"{name}.log"
        self.extra = extra or []
        self.proc: subprocess.Popen | None = None
        # Set before the tool itself stops the process (kill -9, SIGTERM): any other exit is the
        # service's own (an unexpected exit).
        self.stopping = False
        self.started_t: float | None = None  # soak time of the process's start

    def start(self) -> None:
        a = self.soak.args
        cmd = [
            str(self.soak.binary), "run",
            "--brokers", self.soak.proxy.addr,
            "--metrics-addr", self.metrics,
            "--index-dir", str(self.index),
            "--group-id", a.group,
            "--input-topic", a.topic,
            "--unique-topic", f"{a.topic}.unique",
            "--duplicate-topic", f"{a.topic}.duplicate",
            "--dlq-topic", f"{a.topic}.dlq",
            "--corrections-topic", f"{a.topic}.corrections",
            "--exclusive-grace-ms", str(a.grace_ms),
            "--rebalance-timeout-ms", "5000",
            "--progress-timeout-ms", str(a.progress_timeout_ms),
            "-X", "session.timeout.ms=6000",
            "-X", "heartbeat.interval.ms=500",
            "-X", "max.poll.interval.ms=10000",
            *a.service_arg,
            *self.extra,
        ]
        with open(self.log, "ab") as f:
            f.write(f"---- soak: start {time.strftime('%H:%M:%S')}\n".encode())
            f.flush()
            env = dict(os.environ, NEWSDEDUP_LOG=a.log_level)
            self.stopping = False
            self.started_t = self.soak.now()
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=f, env=env)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int) -> None:
        """The tool stops the process (kill -9, SIGTERM): not an unexpected exit."""
        self.stopping = True
        self.signal(sig)

    def last_log_line(self) -> str:
        return last_line(self.log)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc and self.proc.poll() is None else None

    def signal(self, sig: int) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def wait(self, limit: float) -> int | None:
        if not self.proc:
            return None
        try:
            return self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            return None

    def wait_http(self, limit: float = 60) -> bool:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if self.proc and self.proc.poll() is not None:
                return False
            if http_get(self.metrics, "/health", 1.0):
                return True
            time.sleep(0.1)
        return False

    def rss_kb(self) -> int | None:
        pid = self.pid
        if pid is None:
            return None
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            return None
        return None


# ---------------------------------------------------------------------------------------------


def hostile_record(n: int, ident: str, article: dict) -> tuple[bytes, list | None]:
    """The n-th hostile record, in turn (issue 62): each must get one output (most the DLQ) and
    leave the service running."""
    kind = n % 6
    if kind == 0:  # HTML comments never closed: quadratic to a naive cleaner
        body = dict(article, content="<!--" * 60000 + article.get("content", ""))
        return json.dumps(body, ensure_ascii=False).encode(), None
    if kind == 1:  # not UTF-8, with a long id in it
        return b'{"id":"' + ident.encode() + b'","content":"\xff\xfe' + b"x" * 5000 + b'"}', None
    if kind == 2:  # 20,000 empty headers on a valid article
        return json.dumps(article, ensure_ascii=False).encode(), [("h", b"")] * 20000
    if kind == 3:  # an id too long to be decided under
        return json.dumps(dict(article, id="x" * 5000), ensure_ascii=False).encode(), None
    if kind == 4:  # deeply nested JSON
        return b'{"id":"' + ident.encode() + b'","content":' + b"[" * 100000 + b"]" * 100000 + b"}", None
    # a 600 KB title
    return json.dumps(dict(article, title="标题" * 100000), ensure_ascii=False).encode(), None


def load_articles(limit: int) -> list[dict]:
    corpus = Path(os.environ.get("NEWSDEDUP_CORPUS_DIR", REPO.parent / "shared" / "data" / "corpus"))
    files = sorted(corpus.glob("*.jsonl")) if corpus.is_dir() else []
    if not files:
        files = [REPO / "examples" / "sample_articles.jsonl"]
    out = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    a = json.loads(line)
                except ValueError:
                    continue
                if isinstance(a, dict) and isinstance(a.get("content"), str) and a["content"].strip():
                    out.append({k: a[k] for k in ("title", "content", "source", "url", "published_at") if k in a})
                if len(out) >= limit:
                    return out
    return out


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.dir = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="newsdedup-soak-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.binary = Path(args.binary)
        self.proxy = CutProxy()
        self.broker_state = self.dir / "broker"
        self.bootstrap = ""
        self.t0 = time.monotonic()
        self.stop_producing = threading.Event()
        self.stop_all = threading.Event()
        self.lock = threading.Lock()
        # Produced records: (partition, offset) -> article id; failed deliveries counted.
        self.produced: dict[tuple[int, int], str] = {}
        self.produce_failed = 0
        self.produced_end: dict[int, int] = {}
        # Outputs of input records: (partition, offset) -> list of (decision, match id).
        self.outputs: dict[tuple[int, int], list[tuple[str, str | None]]] = {}
        self.decided_ids: dict[str, tuple[str, str | None]] = {}
        self.decided_at: dict[str, float] = {}
        self.correction_outputs: dict[str, int] = {}
        # Process state for the probes: "up" only while the process runs and is not frozen.
        self.expected_up = False
        self.probes: list[tuple[float, int | None, float | None, dict]] = []
        self.samples: list[dict] = []
        self.faults: list[dict] = []
        self.newcomers: list[dict] = []
        self.corrections: list[str] = []
        self.restarts = 0
        # Soak times of the service's process starts (its clock of waiting starts at each), the
        # monotonic time of the last restart's first answer, and exits the tool did not cause.
        self.starts: list[float] = []
        self.last_restart = 0.0
        self.unexpected_exits: list[dict] = []
        self.exit_seen: set[int] = set()
        self.exit_lock = threading.Lock()
        self.service = Service(self, "run", self.dir / "index")

    def now(self) -> float:
        return time.monotonic() - self.t0

    # -- setup --------------------------------------------------------------------------------

    def start_broker(self) -> None:
        out = subprocess.run(
            ["bash", str(REPO / "scripts" / "broker.sh"), "start", "--state-dir", str(self.broker_state),
             "--advertised", self.proxy.addr],
            check=True, stdout=subprocess.PIPE, text=True,
        )
        self.bootstrap = out.stdout.strip().splitlines()[-1]
        self.proxy.forward_to(self.bootstrap)
        t = self.args.topic
        subprocess.run(
            ["bash", str(REPO / "scripts" / "broker.sh"), "create-topics", "--state-dir", str(self.broker_state),
             f"{t}:{self.args.partitions}", f"{t}.unique:1", f"{t}.duplicate:1", f"{t}.dlq:1", f"{t}.corrections:1"],
            check=True, stdout=subprocess.DEVNULL,
        )
        log(f"broker {self.bootstrap}, advertised as the proxy {self.proxy.addr}; work dir {self.dir}")

    def stop_broker(self) -> None:
        subprocess.run(["bash", str(REPO / "scripts" / "broker.sh"), "stop", "--state-dir", str(self.broker_state)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # -- threads --------------------------------------------------------------------------------

    def producer(self) -> None:
        from confluent_kafka import Producer

        articles = load_articles(30000)
        p = Producer({"bootstrap.servers": self.proxy.addr, "linger.ms": 5, "message.timeout.ms": 600000,
                      "client.id": "soak-producer", "log_level": 3})
        rate = self.args.rate
        seq = 0

        def delivered(err, msg, ident):
            with self.lock:
                if err is not None:
                    self.produce_failed += 1
                    return
                key = (msg.partition(), msg.offset())
                self.produced[key] = ident
                self.produced_end[msg.partition()] = max(self.produced_end.get(msg.partition(), 0), msg.offset() + 1)

        start = time.monotonic()
        while not self.stop_producing.is_set():
            due = start + seq / rate
            delay = due - time.monotonic()
            if delay > 0:
                p.poll(min(delay, 0.05))
                continue
            a = dict(articles[seq % len(articles)])
            ident = f"soak-{seq}"
            a["id"] = ident
            value, headers = json.dumps(a, ensure_ascii=False).encode(), None
            every = self.args.hostile_every
            if every > 0 and seq % every == every - 1:
                value, headers = hostile_record(seq // every, ident, a)
            try:
                p.produce(self.args.topic, key=ident.encode(), value=value, headers=headers,
                          on_delivery=lambda err, msg, i=ident: delivered(err, msg, i))
            except BufferError:
                p.poll(0.1)
                continue
            seq += 1
            p.poll(0)
        left = p.flush(120)
        self.produced_total = seq
        log(f"producer stopped: {seq} produced ({left} undelivered after the flush)")

    def reader(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        t = self.args.topic
        c = Consumer({"bootstrap.servers": self.proxy.addr, "group.id": "soak-reader", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "client.id": "soak-reader", "log_level": 3})
        c.assign([TopicPartition(f"{t}.{k}", 0, 0) for k in ("unique", "duplicate", "dlq")])
        while not self.stop_all.is_set():
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            h = {k: (v.decode("utf-8", "replace") if v is not None else "") for k, v in (msg.headers() or [])}
            try:
                body = json.loads(msg.value())
            except (ValueError, TypeError, RecursionError):
                body = {}
            dedup = body.get("dedup") if isinstance(body, dict) else None
            dedup = dedup if isinstance(dedup, dict) else {}
            match = dedup.get("match") if isinstance(dedup.get("match"), dict) else {}
            decision = (h.get("newsdedup.decision", dedup.get("decision", "?")), match.get("id"))
            ident = body.get("id") if isinstance(body, dict) else None
            with self.lock:
                if h.get("newsdedup.source.topic") == t:
                    try:
                        key = (int(h["newsdedup.source.partition"]), int(h["newsdedup.source.offset"]))
                    except (KeyError, ValueError):
                        continue
                    self.outputs.setdefault(key, []).append(decision)
                    if isinstance(ident, str):
                        self.decided_ids[ident] = decision
                        self.decided_at[ident] = time.time()
                elif dedup.get("correction") and isinstance(ident, str):
                    self.correction_outputs[ident] = self.correction_outputs.get(ident, 0) + 1
        c.close()

    def prober(self) -> None:
        while not self.stop_all.is_set():
            t = self.now()
            svc = self.service
            proc = svc.proc
            up = self.expected_up and svc.alive()
            r = http_get(svc.metrics, "/health", 1.0)
            # Up only while the process lived throughout the probe (it can exit by itself).
            up = up and svc.proc is proc and svc.alive()
            self.note_exit()
            body = {}
            if r:
                try:
                    body = json.loads(r[1])
                except ValueError:
                    body = {}
            with self.lock:
                self.probes.append((t, r[0] if r else None, r[2] if r else None,
                                    {"up": up, "pid": proc.pid if proc else None, "since": svc.started_t, **body}))
            time.sleep(max(0.0, 0.5 - (self.now() - t)))

    def sampler(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.args.group, "enable.auto.commit": False,
                      "client.id": "soak-offsets", "log_level": 3})
        parts = [TopicPartition(self.args.topic, p) for p in range(self.args.partitions)]
        while not self.stop_all.is_set():
            t = self.now()
            committed = {}
            try:
                for tp in c.committed(parts, timeout=5):
                    committed[tp.partition] = tp.offset if tp.offset >= 0 else 0
            except Exception as e:  # the broker is reachable directly (not through the proxy)
                committed = {"error": str(e)}
            m = http_get(self.service.metrics, "/metrics", 2.0)
            text = m[1] if m and m[0] == 200 else ""
            with self.lock:
                self.samples.append({
                    "t": t,
                    "rss_kb": self.service.rss_kb(),
                    "committed": committed,
                    "produced_end": dict(self.produced_end),
                    "produced": len(self.produced),
                    "fetch_paused": metric_values(text, "newsdedup_fetch_paused"),
                    "in_flight": metric_values(text, "newsdedup_in_flight"),
                    "consumed": metric_values(text, "newsdedup_consumed_offset"),
                })
            time.sleep(max(0.0, 2.0 - (self.now() - t)))
        c.close()

    # -- faults ---------------------------------------------------------------------------------

    def restart(self) -> None:
        self.service.start()
        self.starts.append(self.service.started_t)
        self.restarts += 1
        if self.service.wait_http(60):
            self.expected_up = True
        else:
            log("the service did not answer /health within 60 s of its start")
        self.last_restart = time.monotonic()

    def note_exit(self) -> bool:
        """Records an exit of the service that the tool did not cause (once per process);
        True when the service is down by itself."""
        s = self.service
        with self.exit_lock:
            proc = s.proc
            if proc is None or s.stopping:
                return False
            code = proc.poll()
            if code is None:
                return False
            if proc.pid not in self.exit_seen:
                self.exit_seen.add(proc.pid)
                rec = {"t": round(self.now(), 1), "exit": code, "pid": proc.pid,
                       "started": round(s.started_t, 1) if s.started_t is not None else None,
                       "last_log_line": s.last_log_line()[-400:]}
                self.unexpected_exits.append(rec)
                log(f"the service exited by itself (exit {code}): {rec['last_log_line'][:200]}")
            return True

    def revive(self) -> None:
        """Restarts the service after an exit of its own (as an orchestrator would)."""
        if self.note_exit():
            self.expected_up = False
            self.restart()
            self.unexpected_exits[-1]["restarted"] = round(self.now(), 1)

    def fault(self, kind: str) -> dict:
        s = self.service
        rec: dict = {"kind": kind, "t": round(self.now(), 1)}
        if kind == "kill9":
            self.expected_up = False
            s.stop(signal.SIGKILL)
            s.wait(10)
            self.restart()
        elif kind == "cut":
            self.proxy.cut()
            time.sleep(10)
            self.proxy.restore()
        elif kind == "freeze":
            self.expected_up = False
            s.signal(signal.SIGSTOP)
            time.sleep(10)
            s.signal(signal.SIGCONT)
            time.sleep(0.5)
            self.expected_up = True
        elif kind == "idle":
            socks = []
            host, port = s.metrics.rsplit(":", 1)
            for _ in range(200):
                try:
                    socks.append(socket.create_connection((host, int(port)), timeout=2))
                except OSError:
                    break
            rec["sockets"] = len(socks)
            time.sleep(10)
            for x in socks:
                x.close()
        elif kind == "term":
            self.expected_up = False
            started = time.monotonic()
            s.stop(signal.SIGTERM)
            code = s.wait(45)
            rec["exit"] = code
            rec["seconds"] = round(time.monotonic() - started, 1)
            if code is None:
                s.stop(signal.SIGKILL)
                s.wait(10)
            self.restart()
        elif kind == "newcomer":
            n = len(self.newcomers) + 1
            nc = Service(self, f"newcomer-{n}", self.dir / f"newcomer-{n}")
            nc.start()
            started = time.monotonic()
            code = nc.wait(90)
            if code is None:
                nc.signal(signal.SIGKILL)
                nc.wait(10)
            text = nc.log.read_text(errors="replace") if nc.log.exists() else ""
            articles = index_articles(self.binary, nc.index)
            info = {"n": n, "t": rec["t"], "exit": code, "seconds": round(time.monotonic() - started, 1),
                    "stepped_down": "another instance is active" in text, "indexed": articles,
                    "assigned": bool(ASSIGNED.search(text))}
            info["outcome"] = newcomer_outcome(code, info["stepped_down"], articles, info["assigned"])
            # Only a newcomer that decided something is a failure of the service.
            info["ok"] = info["outcome"] != "decided"
            self.newcomers.append(info)
            rec.update(info)
        elif kind == "correction":
            with self.lock:
                # Decided in the last minute: `correct` then reads only the outputs of the last two
                # (--since); from their beginning it would read the topics whole.
                recent = time.time() - 60
                dups = [i for i, d in self.decided_ids.items()
                        if d[0] == "duplicate" and i not in self.corrections and self.decided_at.get(i, 0) >= recent]
            if not dups:
                rec["skipped"] = "no duplicate decided yet"
            else:
                ident = random.Random(len(self.corrections)).choice(sorted(dups))
                t = self.args.topic
                since = str(int(time.time()) - 120)
                cmd = [str(self.binary), "correct", "release", "--id", ident, "--by", "soak", "--reason", "soak",
                       "--brokers", self.proxy.addr, "--corrections-topic", f"{t}.corrections",
                       "--unique-topic", f"{t}.unique", "--duplicate-topic", f"{t}.duplicate",
                       "--dlq-topic", f"{t}.dlq", "--wait", "0", "--since", since,
                       "--audience", self.args.group]
                rec["id"] = ident
                try:
                    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
                    rec["correct_exit"] = r.returncode
                    if r.returncode == 0:
                        self.corrections.append(ident)
                    else:
                        rec["error"] = (r.stderr or r.stdout)[-500:]
                except subprocess.TimeoutExpired as e:
                    said = e.stderr.decode("utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
                    rec["error"] = "newsdedup correct did not finish within 60 s; its stderr: " + said[-500:]
                # In flight: the service is killed while it applies it.
                time.sleep(0.3)
                self.expected_up = False
                s.stop(signal.SIGKILL)
                s.wait(10)
                self.restart()
        rec["end"] = round(self.now(), 1)
        return rec

    # -- run ------------------------------------------------------------------------------------

    def run(self) -> int:
        a = self.args
        self.start_broker()
        self.restart()
        self.last_restart = 0.0  # the first start follows no kill: the restart gap does not apply
        threads = [threading.Thread(target=f, daemon=True, name=f.__name__)
                   for f in (self.producer, self.reader, self.prober, self.sampler)]
        for th in threads:
            th.start()
        kinds = a.faults.split(",")
        end = self.t0 + a.duration
        slot = 0
        next_at = self.t0 + a.fault_every
        while time.monotonic() + a.fault_every <= end + 1:
            kind = kinds[slot % len(kinds)]
            # A fault that stops the service never within RESTART_GAP s of a restart (on Tansu a
            # SIGTERM ~6 s after a restart that followed a kill -9 wedged the group for good).
            while time.monotonic() < fault_due(next_at, kind, self.last_restart):
                self.revive()
                time.sleep(0.2)
            if time.monotonic() + a.fault_every > end + 1:
                break
            self.revive()
            slot += 1
            log(f"fault {slot}: {kind}")
            rec = self.fault(kind)
            self.faults.append(rec)
            # The next fault a period after this one's slot, and at least 5 s after it ended (a
            # correction can take a minute; the restart gap above keeps kills off a restart).
            next_at = max(next_at + a.fault_every, time.monotonic() + 5)
        while time.monotonic() < end:
            self.revive()
            time.sleep(0.2)
        log("producing stops; waiting for every record to be decided")
        self.stop_producing.set()
        threads[0].join(180)
        drain_start = self.now()
        deadline = time.monotonic() + a.drain
        while time.monotonic() < deadline:
            with self.lock:
                missing = sum(1 for k in self.produced if k not in self.outputs)
            if missing == 0:
                break
            self.revive()
            time.sleep(1)
        drained_after = self.now() - drain_start
        self.drain_end = self.now()
        self.note_exit()
        self.expected_up = False
        started = time.monotonic()
        self.service.stop(signal.SIGTERM)
        final_exit = self.service.wait(45)
        final_stop = time.monotonic() - started
        time.sleep(3)  # the reader catches the last outputs
        self.stop_all.set()
        for th in threads[1:]:
            th.join(15)
        summary = self.summarize(drained_after, final_exit, final_stop)
        self.proxy.stop()
        self.stop_broker()
        return 0 if summary["passed"] else 3 if summary["inconclusive"] else 1

    # -- checks ---------------------------------------------------------------------------------

    def summarize(self, drained_after: float, final_exit: int | None, final_stop: float) -> dict:
        a = self.args
        with self.lock:
            produced = dict(self.produced)
            outputs = {k: list(v) for k, v in self.outputs.items()}
            probes = list(self.probes)
            samples = list(self.samples)
        missing = [k for k in produced if k not in outputs]
        # Lost: an input without an output although the group committed past it (an undecided
        # record beyond the committed offset is only late: a restart decides it).
        final_committed: dict[int, int] = {}
        for s in reversed(samples):
            c = s["committed"]
            if isinstance(c, dict) and "error" not in c:
                final_committed = c
                break
        lost = [k for k in missing if k[1] < final_committed.get(k[0], 0)]
        repeats = {k: v for k, v in outputs.items() if len(v) > 1}
        changed = {k: v for k, v in repeats.items() if len(set(v)) > 1}
        decisions: dict[str, int] = {}
        for v in outputs.values():
            decisions[v[0][0]] = decisions.get(v[0][0], 0) + 1

        # /health while the process was up (not between a kill and the restart's first answer,
        # nor frozen).
        up = [p for p in probes if p[3].get("up")]
        slow = [p for p in up if p[1] is None or (p[2] or 0) > 1.0]
        lat = sorted(p[2] for p in up if p[2] is not None)

        # Stuck: records wait (produced end beyond committed) while the committed offsets stand
        # still; past the limit, /health must say 503 (unless the broker is unreachable, or the
        # process is younger than the limit: its clock of waiting starts at its own start).
        limit = a.progress_timeout_ms / 1000
        stuck_windows, lag_series, max_lag = find_stuck_windows(samples, a.partitions, limit)
        unreported, exempt = judge_503(up, stuck_windows, self.starts, limit)
        wedges = wedge_windows(probes)
        # A slowdown: after the last fault the backlog must fall (the service decides faster
        # than records arrive) until nothing waits; and the backlog after each fault is worked
        # off before the next fault's end.
        recovery = []
        for i, f in enumerate(self.faults):
            # Until the fault after next: at 15 s apart (--ci) one period is shorter than a
            # freeze or a newcomer's backlog takes to work off.
            nxt = self.faults[i + 2]["t"] if i + 2 < len(self.faults) else None
            window = [lg for (t, lg) in lag_series if t >= f["end"] and (nxt is None or t <= nxt)]
            if window:
                recovery.append({"fault": f["kind"], "t": f["t"], "end": f["end"],
                                 "until": nxt if nxt is not None else end_of(lag_series),
                                 "lag_after": window[0], "lag_min": min(window)})
        # Fine when the backlog came down to what arrives in a few seconds (commits are batched).
        bound = a.rate * 10
        not_recovered = [r for r in recovery if r["lag_min"] > bound]

        rss = [(s["t"], s["rss_kb"]) for s in samples if s["rss_kb"]]
        third = a.duration / 3
        first = [r for t, r in rss if t < third]
        last = [r for t, r in rss if t >= 2 * third]
        rss_first = max(first) if first else None
        rss_last = max(last) if last else None
        memory_flat = bool(rss_first and rss_last and rss_last <= rss_first * 1.5 + 64 * 1024)

        newcomers_ok = all(n["ok"] for n in self.newcomers)
        corrections_missing = [i for i in self.corrections if i not in self.correction_outputs]
        correction_t = {f.get("id"): f["t"] for f in self.faults if f["kind"] == "correction"}
        end_t = getattr(self, "drain_end", self.now())
        checks = {
            "nothing lost": not lost and self.produce_failed == 0,
            "no decision changed": not changed,
            "all decided": not missing,
            "recovers after every fault": not not_recovered,
            "memory flat": memory_flat,
            "health answers within 1 s": not slow,
            "503 while stuck": not unreported,
            "newcomers step down": newcomers_ok,
            "corrections applied": not corrections_missing,
            "final stop clean": final_exit == 0,
            "no unexpected exit": not self.unexpected_exits,
        }
        # When each failure happened (spans for the recoveries); a check without times (lost or
        # changed decisions, memory, a newcomer that decided) is never put down to the broker.
        failed_at = {
            "all decided": [(end_t, end_t)],
            "recovers after every fault": [(r["end"], r["until"]) for r in not_recovered],
            "health answers within 1 s": [(p[0], p[0]) for p in slow],
            "503 while stuck": [(t, t) for t in unreported],
            "corrections applied": [(correction_t.get(i, 0.0),) * 2 for i in corrections_missing],
            "no unexpected exit": [(e["t"], e["t"]) for e in self.unexpected_exits],
        }
        aftermath = wedge_aftermath(wedges, lag_series, bound)
        result = verdict(checks, failed_at, wedges, {"recovers after every fault": aftermath})
        summary = {
            "duration_s": a.duration,
            "rate": a.rate,
            "produced": len(produced),
            "produce_failed": self.produce_failed,
            "decided": len(outputs),
            "decisions": decisions,
            "missing": len(missing),
            "lost": len(lost),
            "missing_sample": sorted(missing)[:10],
            "decided_more_than_once": len(repeats),
            "changed_decisions": len(changed),
            "changed_sample": [[list(k), v] for k, v in list(changed.items())[:5]],
            "drained_after_s": round(drained_after, 1),
            "final_stop": {"exit": final_exit, "seconds": round(final_stop, 1)},
            "faults": self.faults,
            "restarts": self.restarts,
            "service_starts": [round(t, 1) for t in self.starts],
            "unexpected_exits": self.unexpected_exits,
            "newcomers": self.newcomers,
            "newcomer_outcomes": count_by(self.newcomers, lambda n: n.get("outcome", "?")),
            "corrections": {"produced": len(self.corrections), "applied": len(self.corrections) - len(corrections_missing)},
            "max_backlog": max_lag,
            "recovery": recovery,
            "not_recovered": not_recovered,
            "health": {
                "probes_up": len(up),
                "unanswered_or_slow": len(slow),
                "p50_ms": round(lat[len(lat) // 2] * 1000, 1) if lat else None,
                "max_ms": round(lat[-1] * 1000, 1) if lat else None,
                "status_counts": count_by(up, lambda p: str(p[1])),
            },
            "stuck_windows": [[round(w0, 1), round(w1, 1)] for w0, w1 in stuck_windows],
            "stuck_but_200": len(unreported),
            "stuck_200_others_in_charge": len(exempt),
            "broker_wedged": [[round(w0, 1), round(w1, 1)] for w0, w1 in wedges],
            "rss_kb": {"first_third_max": rss_first, "last_third_max": rss_last,
                       "min": min((r for _, r in rss), default=None), "max": max((r for _, r in rss), default=None)},
            "checks": checks,
            "passed": all(checks.values()),
            "verdict": result,
            "inconclusive": result.startswith("INCONCLUSIVE"),
            "dir": str(self.dir),
        }
        (self.dir / "summary.json").write_text(json.dumps(summary, indent=1))
        (self.dir / "samples.json").write_text(json.dumps({"samples": samples, "probes": probes,
                                                           "starts": self.starts}))
        print_summary(summary)
        return summary


def end_of(series: list) -> float:
    return series[-1][0] if series else 0.0


def count_by(items, key) -> dict:
    out: dict = {}
    for i in items:
        out[key(i)] = out.get(key(i), 0) + 1
    return out


def index_articles(binary: Path, index: Path) -> int | None:
    if not index.exists():
        return 0
    r = subprocess.run([str(binary), "index", "stats", "--json", "--index-dir", str(index)],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        return int(json.loads(r.stdout)["articles"])
    except (ValueError, KeyError, TypeError):
        return None


def print_summary(s: dict) -> None:
    print(f"\n== soak summary ({s['duration_s'] / 60:.1f} min at {s['rate']}/s; {s['dir']})")
    print(f"produced {s['produced']} (failed {s['produce_failed']}), decided {s['decided']} {s['decisions']}, "
          f"undecided {s['missing']}, lost {s['lost']}, decided more than once {s['decided_more_than_once']}, "
          f"changed {s['changed_decisions']}; drained {s['drained_after_s']} s after producing stopped")
    kinds = count_by(s["faults"], lambda f: f["kind"])
    print(f"faults {len(s['faults'])} {kinds}; restarts {s['restarts']}; newcomers {len(s['newcomers'])}: "
          f"{s['newcomer_outcomes']}; corrections applied {s['corrections']['applied']}/{s['corrections']['produced']}")
    for e in s["unexpected_exits"]:
        print(f"unexpected exit at {e['t']} s (exit {e['exit']}, up since {e['started']} s): {e['last_log_line'][:300]}")
    h = s["health"]
    print(f"/health: {h['probes_up']} probes while up, {h['unanswered_or_slow']} unanswered or > 1 s, "
          f"p50 {h['p50_ms']} ms, max {h['max_ms']} ms, statuses {h['status_counts']}")
    print(f"backlog max {s['max_backlog']} records; stuck windows {s['stuck_windows']} "
          f"(probes saying 200 in them past the limit: {s['stuck_but_200']}, besides "
          f"{s['stuck_200_others_in_charge']} waiting for another member of a Stable group); faults not "
          f"recovered from: {len(s['not_recovered'])}")
    for w0, w1 in s["broker_wedged"]:
        print(f"broker group wedged: from {w0} s to {w1} s (state Unknown, no partition held, records waiting)")
    r = s["rss_kb"]
    print(f"RSS (kB): max first third {r['first_third_max']}, max last third {r['last_third_max']}, "
          f"range {r['min']}-{r['max']}; final stop exit {s['final_stop']['exit']} in {s['final_stop']['seconds']} s")
    for name, ok in s["checks"].items():
        print(f"  {'PASS' if ok else 'FAIL'}  {name}")
    print(s["verdict"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=parse_duration, default=parse_duration("20m"),
                    help="how long records are produced and faults made (e.g. 2m, 20m, 1h) [20m]")
    ap.add_argument("--ci", action="store_true", help="the 2-minute version: --duration 2m --fault-every 15")
    ap.add_argument("--fault-every", type=float, default=30.0, help="seconds between faults [30]")
    ap.add_argument("--faults", default="kill9,cut,freeze,newcomer,idle,correction,term",
                    help="the faults, in turn [%(default)s]")
    ap.add_argument("--rate", type=float, default=100.0, help="articles per second [100]")
    ap.add_argument("--hostile-every", type=int, default=50,
                    help="every N-th record is a hostile one (comment bomb, bad UTF-8, 20k headers, long id, deep "
                         "nesting, huge title, in turn); 0: none [50]")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--grace-ms", type=int, default=10000, help="--exclusive-grace-ms of the service [10000]")
    ap.add_argument("--progress-timeout-ms", type=int, default=60000,
                    help="--progress-timeout-ms of the service: the limit of the 503 check [60000]")
    ap.add_argument("--drain", type=parse_duration, default=parse_duration("180s"),
                    help="how long the service may take to decide the rest once producing stops [180s]")
    ap.add_argument("--topic", default="soak.raw")
    ap.add_argument("--group", default="soak")
    ap.add_argument("--binary", default=None,
                    help="newsdedup binary [$CARGO_TARGET_DIR/release/newsdedup, else target/release/newsdedup]")
    ap.add_argument("--dir", default=None, help="work directory (kept) [a new temporary one]")
    ap.add_argument("--log-level", default="info", help="NEWSDEDUP_LOG of the service [info]")
    ap.add_argument("--service-arg", action="append", default=[],
                    help="one more argument for `newsdedup run` (repeatable), e.g. --service-arg=-Xdebug=fetch")
    args = ap.parse_args()
    if args.ci:
        args.duration = parse_duration("2m")
        args.fault_every = 15.0
    if args.binary is None:
        target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
        args.binary = str(target / "release" / "newsdedup")
    if not Path(args.binary).exists():
        sys.exit(f"soak: no binary at {args.binary} (cargo build --release, or --binary)")
    ensure_client()
    soak = Soak(args)

    def interrupted(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    try:
        return soak.run()
    except KeyboardInterrupt:
        log("interrupted")
        return 2
    finally:
        for svc in [soak.service]:
            if svc.proc and svc.proc.poll() is None:
                svc.stopping = True
                svc.proc.kill()
        soak.proxy.stop()
        soak.stop_broker()
        log(f"logs, samples and summary kept in {soak.dir}")


if __name__ == "__main__":
    sys.exit(main())
