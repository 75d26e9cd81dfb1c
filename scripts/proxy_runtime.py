#!/usr/bin/env python3
"""scripts/proxy_runtime.py — the process side shared by the test proxies (standard library only).

scripts/tls_proxy.py and scripts/sasl_proxy.py differ only in what they do with a connection before
relaying its bytes; everything around that lives here: the one-line stderr log with the proxy's
name, HOST:PORT parsing, the common options (--upstream HOST:PORT|-, --listen, --watch-stdin), the
upstream connection and the byte pump of each connection, and the process lifecycle of main()
(print the bound port as the first stdout line, stop on SIGTERM/SIGINT, on the parent's death or
on stdin's end, read the upstream from stdin with `--upstream -`, and exit without waiting for the
stdin reader thread or open connections). It is not run by itself.
"""

import asyncio
import os
import signal
import sys

_name = "proxy"


def set_name(name):
    """Sets the prefix of every log line ("NAME: message")."""
    global _name
    _name = name


def log(msg):
    print(f"{_name}: {msg}", file=sys.stderr, flush=True)


def parse_addr(text):
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {text.strip()!r}")
    return host.strip("[]"), int(port)


def add_upstream_arg(ap):
    ap.add_argument("--upstream", required=True, help="HOST:PORT, or - to read it from stdin")


def add_listen_args(ap):
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--watch-stdin", action="store_true")


# ---------------------------------------------------------------------------------------------
# Connections


async def pump(reader, writer):
    """Copies reader to writer until either end fails or closes (ssl.SSLError is an OSError)."""
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - already broken
            pass


class Upstream:
    """The upstream address of a proxy, which may become known only after the port is printed."""

    def __init__(self, upstream):
        self.upstream = upstream  # (host, port) or None until known
        self.upstream_known = asyncio.Event()
        self.conns = 0

    async def open_upstream(self, tag, writer):
        """(reader, writer) to the upstream, or None (logged, client closed) if unreachable."""
        await self.upstream_known.wait()
        try:
            return await asyncio.open_connection(*self.upstream)
        except OSError as e:
            log(f"{tag}: upstream {self.upstream} unreachable: {e}")
            writer.close()
            return None


async def relay(tag, reader, writer, up_reader, up_writer):
    """Forwards both ways until the connection ends, then logs its closing."""
    await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
    log(f"{tag}: closed")


# ---------------------------------------------------------------------------------------------
# Process


async def watch_parent(parent):
    while os.getppid() == parent:
        await asyncio.sleep(0.5)
    log("parent process exited; stopping")


async def read_stdin_line(loop):
    return await loop.run_in_executor(None, sys.stdin.readline)


async def watch_stdin_eof(loop):
    while True:
        line = await read_stdin_line(loop)
        if not line:
            log("stdin closed; stopping")
            return


async def serve(server, proxy, args, parent, listening, forwarding):
    """Runs a started server until it is to stop; returns the exit code.

    `proxy` is an Upstream; `args` has upstream and watch_stdin; `parent` is the parent pid seen
    at start; `listening(port)` and `forwarding` complete the "listening on" and "forwarding to"
    log lines.
    """
    loop = asyncio.get_running_loop()
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    log(listening(port))

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    watchers = [
        asyncio.ensure_future(watch_parent(parent)),
        asyncio.ensure_future(stop.wait()),
    ]
    if proxy.upstream is None:
        first_line = asyncio.ensure_future(read_stdin_line(loop))
        done, _ = await asyncio.wait(
            watchers + [first_line], return_when=asyncio.FIRST_COMPLETED
        )
        if first_line not in done:
            return 0
        if not first_line.result():
            log("stdin closed before the upstream was given; stopping")
            return 0
        try:
            proxy.upstream = parse_addr(first_line.result())
        except ValueError as e:
            log(f"bad upstream on stdin: {e}")
            return 2
    proxy.upstream_known.set()
    log(f"forwarding to {proxy.upstream[0]}:{proxy.upstream[1]} {forwarding}")
    if args.watch_stdin or args.upstream == "-":
        watchers.append(asyncio.ensure_future(watch_stdin_eof(loop)))

    await asyncio.wait(watchers, return_when=asyncio.FIRST_COMPLETED)
    server.close()
    return 0


def run(main):
    """Runs the coroutine function `main` and exits with its code."""
    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        code = 0
    # Do not wait for the stdin reader thread or open connections.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
