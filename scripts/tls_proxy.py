#!/usr/bin/env python3
"""scripts/tls_proxy.py — a TLS-terminating TCP proxy (Python standard library only).

Accepts TLS connections on a local port, completes the handshake with the given server
certificate and key, and relays the decrypted bytes to a plain TCP upstream (e.g. the local
Tansu broker of scripts/broker.sh, which speaks plaintext only). Kafka clients can then
use security.protocol=SSL (or SASL_SSL: SASL frames pass through untouched) against the
proxy. Used by tests/kafka_tls.rs; the broker must advertise the proxy's address
(scripts/broker.sh start --advertised HOST:PORT) so that clients come back through it.

Usage:
  scripts/tls_proxy.py --cert CERT.pem --key KEY.pem --upstream HOST:PORT|- [--listen HOST:PORT]

  --cert, --key   server certificate (chain) and private key, PEM
  --upstream      where to forward the bytes; "-" reads HOST:PORT from the first line of stdin
                  (so the proxy's port can be known before the upstream is started)
  --listen        where to listen (default 127.0.0.1:0, i.e. a free port)
  --watch-stdin   exit when stdin reaches end of file (implied by --upstream -)

The listening port is printed as the first line on stdout as soon as the socket is bound.
Events (connections, handshake failures, upstream errors) go to stderr, one line each.
Exits on SIGTERM/SIGINT, when its parent process dies, and (with --watch-stdin) when stdin
is closed; open connections are dropped.
"""

import argparse
import asyncio
import logging
import os
import signal
import ssl
import sys


def log(msg):
    print(f"tls_proxy: {msg}", file=sys.stderr, flush=True)


def parse_addr(text):
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT, got {text.strip()!r}")
    return host.strip("[]"), int(port)


async def pump(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError, ssl.SSLError):
        pass
    finally:
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - already broken
            pass


class Proxy:
    def __init__(self, ctx, upstream):
        self.ctx = ctx
        self.upstream = upstream  # (host, port) or None until known
        self.upstream_known = asyncio.Event()
        self.conns = 0

    async def handle(self, reader, writer):
        self.conns += 1
        n = self.conns
        peer = writer.get_extra_info("peername")
        if self.ctx is not None:
            # Handshake here (not in start_server) so that failures can be reported.
            try:
                await writer.start_tls(self.ctx)
            except (ssl.SSLError, ConnectionError, OSError) as e:
                log(f"#{n} {peer}: TLS handshake failed: {e}")
                writer.close()
                return
        log(f"#{n} {peer}: TLS established ({writer.get_extra_info('cipher')})")
        await self.upstream_known.wait()
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError as e:
            log(f"#{n} {peer}: upstream {self.upstream} unreachable: {e}")
            writer.close()
            return
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        log(f"#{n} {peer}: closed")


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


async def main():
    ap = argparse.ArgumentParser(
        description="TLS-terminating TCP proxy (see the module docstring)."
    )
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--upstream", required=True, help="HOST:PORT, or - to read it from stdin")
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--watch-stdin", action="store_true")
    args = ap.parse_args()
    # asyncio warns about stream protocols upgraded with start_tls; events are logged here.
    logging.getLogger("asyncio").setLevel(logging.ERROR)

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(args.cert, args.key)

    loop = asyncio.get_running_loop()
    parent = os.getppid()
    listen_host, listen_port = parse_addr(args.listen)
    upstream = None if args.upstream == "-" else parse_addr(args.upstream)

    has_start_tls = hasattr(asyncio.StreamWriter, "start_tls")  # Python >= 3.11
    proxy = Proxy(ctx if has_start_tls else None, upstream)
    server = await asyncio.start_server(
        proxy.handle,
        listen_host,
        listen_port,
        ssl=None if has_start_tls else ctx,
    )
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    log(f"listening on {listen_host}:{port} (TLS)")

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    watchers = [
        asyncio.ensure_future(watch_parent(parent)),
        asyncio.ensure_future(stop.wait()),
    ]
    if upstream is None:
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
    log(f"forwarding to {proxy.upstream[0]}:{proxy.upstream[1]} (plain TCP)")
    if args.watch_stdin or args.upstream == "-":
        watchers.append(asyncio.ensure_future(watch_stdin_eof(loop)))

    await asyncio.wait(watchers, return_when=asyncio.FIRST_COMPLETED)
    server.close()
    return 0


if __name__ == "__main__":
    try:
        code = asyncio.run(main())
    except KeyboardInterrupt:
        code = 0
    # Do not wait for the stdin reader thread or open connections.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
