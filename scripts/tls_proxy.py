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
import ssl
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy_runtime import Upstream, log, parse_addr, relay, run, serve, set_name  # noqa: E402
from proxy_runtime import add_listen_args, add_upstream_arg  # noqa: E402

set_name("tls_proxy")


class Proxy(Upstream):
    def __init__(self, ctx, upstream):
        super().__init__(upstream)
        self.ctx = ctx

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
        tag = f"#{n} {peer}"
        up = await self.open_upstream(tag, writer)
        if up is not None:
            await relay(tag, reader, writer, *up)


async def main():
    ap = argparse.ArgumentParser(
        description="TLS-terminating TCP proxy (see the module docstring)."
    )
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    add_upstream_arg(ap)
    add_listen_args(ap)
    args = ap.parse_args()
    # asyncio warns about stream protocols upgraded with start_tls; events are logged here.
    logging.getLogger("asyncio").setLevel(logging.ERROR)

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(args.cert, args.key)

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
    return await serve(
        server,
        proxy,
        args,
        parent,
        lambda port: f"listening on {listen_host}:{port} (TLS)",
        "(plain TCP)",
    )


if __name__ == "__main__":
    run(main)
