#!/usr/bin/env python3
"""scripts/sasl_proxy.py — a SASL-terminating Kafka proxy (Python standard library only).

Accepts plain TCP connections from Kafka clients, makes each log in with SASL before anything
reaches the broker, then relays the connection's bytes unchanged to a plaintext upstream broker
(e.g. the local Tansu broker of scripts/broker.sh, which cannot hold SASL users). Kafka clients
can then use security.protocol=SASL_PLAINTEXT against the proxy, or SASL_SSL with
scripts/tls_proxy.py in front of it. The broker must advertise the address clients are to use
(scripts/broker.sh start --advertised HOST:PORT) so that every connection comes through here.

Per connection, until the client has logged in:
  * ApiVersions (key 18) is forwarded to the broker and its answer rewritten to advertise
    SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-1);
  * SaslHandshake v1 picks the mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (those given
    with --mechanisms); any other is refused with error 33 UNSUPPORTED_SASL_MECHANISM and the
    enabled list, as Kafka does;
  * SaslAuthenticate carries the exchange (RFC 4616 PLAIN; RFC 5802/7677 SCRAM: salted password
    by PBKDF2, the client's proof verified, the server signature sent); a wrong user or password
    is refused with error 58 SASL_AUTHENTICATION_FAILED and a message, as Kafka does;
  * any other request closes the connection (Kafka does the same before authentication).
After a successful login every byte is forwarded both ways unchanged.

Usage:
  scripts/sasl_proxy.py --user NAME:PASSWORD [--user ...] --upstream HOST:PORT|-
                        [--mechanisms PLAIN,SCRAM-SHA-256,SCRAM-SHA-512] [--listen HOST:PORT]

  --user        a user that may log in (repeatable); the password is never logged
  --upstream    the broker; "-" reads HOST:PORT from the first line of stdin (so the proxy's port
                can be known before the broker is started)
  --mechanisms  the enabled mechanisms (default: all three)
  --listen      where to listen (default 127.0.0.1:0, i.e. a free port)
  --watch-stdin exit when stdin reaches end of file (implied by --upstream -)

The listening port is printed as the first line on stdout as soon as the socket is bound.
Events (connections, logins accepted or refused, protocol errors) go to stderr, one line each.
Exits on SIGTERM/SIGINT, when its parent process dies, and (with --watch-stdin) when stdin is
closed; open connections are dropped.
"""

import argparse
import asyncio
import base64
import hashlib
import hmac
import os
import secrets
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proxy_runtime import Upstream, log, parse_addr, relay, run, serve, set_name  # noqa: E402
from proxy_runtime import add_listen_args, add_upstream_arg  # noqa: E402

set_name("sasl_proxy")

API_SASL_HANDSHAKE = 17
API_API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36
# The versions advertised for the SASL APIs: SaslHandshake v1 makes clients carry the exchange in
# SaslAuthenticate requests (v0 would be raw frames); SaslAuthenticate v1 adds the session lifetime.
SASL_API_VERSIONS = {API_SASL_HANDSHAKE: (0, 1), API_SASL_AUTHENTICATE: (0, 1)}

ERR_UNSUPPORTED_SASL_MECHANISM = 33
ERR_ILLEGAL_SASL_STATE = 34
ERR_SASL_AUTHENTICATION_FAILED = 58

SCRAM_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
SCRAM_ITERATIONS = 4096
ALL_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


# ---------------------------------------------------------------------------------------------
# Kafka protocol primitives


class Reader:
    def __init__(self, data, pos=0):
        self.data = data
        self.pos = pos

    def take(self, n):
        if self.pos + n > len(self.data):
            raise ValueError("truncated message")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode("utf-8")

    def compact_string(self):
        n = self.uvarint() - 1
        return None if n < 0 else self.take(n).decode("utf-8")

    def bytes_(self):
        n = self.i32()
        return b"" if n < 0 else self.take(n)

    def compact_bytes(self):
        n = self.uvarint() - 1
        return b"" if n < 0 else self.take(n)

    def tagged_fields(self):
        """Skips a tagged-field section, returning its raw bytes."""
        start = self.pos
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())
        return self.data[start : self.pos]


def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def enc_string(s):
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def enc_compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode("utf-8")
    return uvarint(len(b) + 1) + b


def enc_bytes(b):
    return struct.pack(">i", len(b)) + b


def enc_compact_bytes(b):
    return uvarint(len(b) + 1) + b


def request_is_flexible(api_key, version):
    """Whether a request uses header v2 (tagged fields), for the APIs read here."""
    return (api_key == API_API_VERSIONS and version >= 3) or (
        api_key == API_SASL_AUTHENTICATE and version >= 2
    )


def parse_request_header(frame):
    """(api_key, version, correlation_id, body offset) of a request frame (without its length)."""
    r = Reader(frame)
    api_key, version, correlation_id = r.i16(), r.i16(), r.i32()
    r.string()  # client_id: a nullable string even in header v2
    if request_is_flexible(api_key, version):
        r.tagged_fields()
    return api_key, version, correlation_id, r.pos


async def read_frame(reader):
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    if size < 0 or size > 100 * 1024 * 1024:
        raise ValueError(f"implausible frame size {size}")
    return await reader.readexactly(size)


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def response(correlation_id, body, flexible_header=False):
    header = struct.pack(">i", correlation_id) + (b"\x00" if flexible_header else b"")
    return frame(header + body)


# ---------------------------------------------------------------------------------------------
# ApiVersions: the broker's answer, with the SASL APIs added


def rewrite_api_versions(version, body):
    """The ApiVersions response body `body` (version `version`) advertising the SASL APIs.

    Layout: error_code int16, api_keys array of (key int16, min int16, max int16[, tagged
    fields]), then (v1+) throttle_time_ms and (v3+) tagged fields, kept as they are. The response
    header is v0 for every version (KIP-511), so `body` starts right after the correlation id.
    """
    flexible = version >= 3
    r = Reader(body)
    error_code = r.i16()
    if error_code != 0:
        return body  # e.g. UNSUPPORTED_VERSION: the client retries with a lower version
    count = r.uvarint() - 1 if flexible else r.i32()
    entries = []
    for _ in range(max(count, 0)):
        key, lo, hi = r.i16(), r.i16(), r.i16()
        tags = r.tagged_fields() if flexible else b""
        if key not in SASL_API_VERSIONS:
            entries.append((key, lo, hi, tags))
    for key, (lo, hi) in SASL_API_VERSIONS.items():
        entries.append((key, lo, hi, b"\x00" if flexible else b""))
    entries.sort()
    rest = body[r.pos :]
    out = struct.pack(">h", error_code)
    out += uvarint(len(entries) + 1) if flexible else struct.pack(">i", len(entries))
    for key, lo, hi, tags in entries:
        out += struct.pack(">hhh", key, lo, hi) + tags
    return out + rest


# ---------------------------------------------------------------------------------------------
# SASL mechanisms


class AuthFailed(Exception):
    """A refused login; the message goes back to the client (never a password)."""


def hmac_of(hash_fn, key, msg):
    return hmac.new(key, msg, hash_fn).digest()


def scram_name(name):
    # RFC 5802 5.1: "," and "=" in a user name are sent as "=2C" and "=3D".
    return name.replace("=2C", ",").replace("=3D", "=")


def parse_scram_attrs(text):
    attrs = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise AuthFailed(f"malformed SCRAM message attribute {key!r}")
        attrs[key] = value
    return attrs


class Plain:
    """RFC 4616: one message, [authzid] NUL authcid NUL passwd."""

    def __init__(self, mechanism, users):
        self.mechanism = mechanism
        self.users = users
        self.user = None
        self.done = False

    def step(self, token):
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthFailed("invalid PLAIN message")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        self.user = user
        if authzid and authzid != user:
            raise AuthFailed(f"authorization id {authzid!r} differs from user {user!r}")
        expected = self.users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthFailed(
                f"Authentication failed: Invalid username or password (mechanism {self.mechanism})"
            )
        self.done = True
        return b""


class Scram:
    """RFC 5802 / RFC 7677, server side: client-first -> server-first, client-final ->
    server-final. Unknown users get the same refusal as a wrong password, after the proof."""

    def __init__(self, mechanism, users):
        self.mechanism = mechanism
        self.hash = SCRAM_HASHES[mechanism]
        self.users = users
        self.user = None
        self.state = "first"
        self.done = False

    def refusal(self):
        return AuthFailed(
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )

    def step(self, token):
        text = token.decode("utf-8", "replace")
        if self.state == "first":
            return self.first(text)
        if self.state == "final":
            return self.final(text)
        raise AuthFailed("unexpected SCRAM message after the exchange ended")

    def first(self, text):
        # gs2-header ("n,," or "n,a=authzid,") then client-first-message-bare.
        cbind, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2 or cbind not in ("n", "y"):
            raise AuthFailed("invalid SCRAM client-first message (channel binding unsupported)")
        attrs = parse_scram_attrs(bare)
        if "n" not in attrs or "r" not in attrs or "m" in attrs:
            raise AuthFailed("invalid SCRAM client-first message")
        self.user = scram_name(attrs["n"])
        self.gs2_header = text[: len(text) - len(bare)]
        self.client_first_bare = bare
        self.nonce = attrs["r"] + base64.b64encode(secrets.token_bytes(18)).decode()
        password = self.users.get(self.user)
        # An unknown user gets a made-up salt and fails at the proof, as a wrong password does.
        self.salt = secrets.token_bytes(16)
        self.salted = hashlib.pbkdf2_hmac(
            self.hash().name,
            (password if password is not None else secrets.token_hex(16)).encode("utf-8"),
            self.salt,
            SCRAM_ITERATIONS,
        )
        self.known = password is not None
        self.server_first = (
            f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={SCRAM_ITERATIONS}"
        )
        self.state = "final"
        return self.server_first.encode()

    def final(self, text):
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise AuthFailed("invalid SCRAM client-final message: no proof")
        attrs = parse_scram_attrs(without_proof)
        if attrs.get("r") != self.nonce:
            raise AuthFailed("invalid SCRAM client-final message: nonce mismatch")
        if base64.b64decode(attrs.get("c", "")) != self.gs2_header.encode():
            raise AuthFailed("invalid SCRAM client-final message: channel binding mismatch")
        auth_message = ",".join([self.client_first_bare, self.server_first, without_proof])
        client_key = hmac_of(self.hash, self.salted, b"Client Key")
        stored_key = self.hash(client_key).digest()
        client_signature = hmac_of(self.hash, stored_key, auth_message.encode())
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise AuthFailed("invalid SCRAM client proof") from None
        if len(proof) != len(client_signature):
            raise self.refusal()
        recovered_client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        self.state = "ended"
        if not self.known or not hmac.compare_digest(
            self.hash(recovered_client_key).digest(), stored_key
        ):
            raise self.refusal()
        server_key = hmac_of(self.hash, self.salted, b"Server Key")
        server_signature = hmac_of(self.hash, server_key, auth_message.encode())
        self.done = True
        return f"v={base64.b64encode(server_signature).decode()}".encode()


# ---------------------------------------------------------------------------------------------
# Connections


class Proxy(Upstream):
    def __init__(self, users, mechanisms, upstream):
        super().__init__(upstream)
        self.users = users
        self.mechanisms = mechanisms

    async def handle(self, reader, writer):
        self.conns += 1
        tag = f"#{self.conns} {writer.get_extra_info('peername')}"
        up = await self.open_upstream(tag, writer)
        if up is None:
            return
        up_reader, up_writer = up
        try:
            logged_in = await self.login(tag, reader, writer, up_reader, up_writer)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            logged_in = False  # the client went away (e.g. after a refusal)
        except ValueError as e:
            log(f"{tag}: protocol error before authentication: {e}; closing")
            logged_in = False
        if not logged_in:
            await self.close_after_refusal(reader, writer)
            try:
                up_writer.close()
            except Exception:  # noqa: BLE001 - already broken
                pass
            return
        await relay(tag, reader, writer, up_reader, up_writer)

    @staticmethod
    async def close_after_refusal(reader, writer):
        """Closes as Kafka does after a refused login: a moment later
        (connection.failed.authentication.delay.ms, 100 ms), and only the sending side first,
        reading what the client still sends until it closes: closing a socket with unread data
        resets the connection, which may discard the refusal before the client has read it."""
        try:
            await asyncio.sleep(0.1)
            if writer.can_write_eof():
                writer.write_eof()
            await asyncio.wait_for(reader.read(), timeout=1.0)
        except Exception:  # noqa: BLE001 - the client went away, or kept the connection open
            pass
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - already broken
            pass

    async def login(self, tag, reader, writer, up_reader, up_writer):
        """Runs the connection until the client has logged in (True) or must be dropped."""
        mechanism = None  # the mechanism's state once a handshake chose it
        while True:
            request = await read_frame(reader)
            api_key, version, correlation_id, body_at = parse_request_header(request)
            body = Reader(request, body_at)
            if api_key == API_API_VERSIONS:
                up_writer.write(frame(request))
                await up_writer.drain()
                answer = await read_frame(up_reader)
                # Response header v0 (correlation id only) for every ApiVersions version.
                rewritten = rewrite_api_versions(version, answer[4:])
                writer.write(frame(answer[:4] + rewritten))
                await writer.drain()
            elif api_key == API_SASL_HANDSHAKE:
                name = body.string()
                enabled = [m for m in ALL_MECHANISMS if m in self.mechanisms]
                if name not in enabled:
                    log(f"{tag}: SaslHandshake v{version}: mechanism {name!r} refused (enabled: {','.join(enabled)})")
                    error = ERR_UNSUPPORTED_SASL_MECHANISM
                else:
                    error = 0
                    kind = Plain if name == "PLAIN" else Scram
                    mechanism = kind(name, self.users)
                out = struct.pack(">h", error) + struct.pack(">i", len(enabled))
                out += b"".join(enc_string(m) for m in enabled)
                writer.write(response(correlation_id, out))
                await writer.drain()
                if error:
                    return False
                if version == 0:
                    # v0 would carry the exchange in raw frames; only v1 is advertised.
                    log(f"{tag}: SaslHandshake v0 (raw SASL frames) is not supported; closing")
                    return False
            elif api_key == API_SASL_AUTHENTICATE:
                flexible = version >= 2
                token = body.compact_bytes() if flexible else body.bytes_()
                if mechanism is None:
                    await self.auth_answer(
                        writer, correlation_id, version, ERR_ILLEGAL_SASL_STATE,
                        "SaslAuthenticate before SaslHandshake", b"",
                    )
                    return False
                try:
                    challenge = mechanism.step(token)
                except AuthFailed as e:
                    log(f"{tag}: {mechanism.mechanism} login refused for user {mechanism.user!r}: {e}")
                    await self.auth_answer(
                        writer, correlation_id, version, ERR_SASL_AUTHENTICATION_FAILED, str(e), b""
                    )
                    return False
                await self.auth_answer(writer, correlation_id, version, 0, None, challenge)
                if mechanism.done:
                    log(f"{tag}: {mechanism.mechanism} login as {mechanism.user!r} accepted")
                    return True
            else:
                log(f"{tag}: request key {api_key} v{version} before authentication; closing")
                return False

    @staticmethod
    async def auth_answer(writer, correlation_id, version, error, message, token):
        flexible = version >= 2
        out = struct.pack(">h", error)
        if flexible:
            out += enc_compact_string(message) + enc_compact_bytes(token)
        else:
            out += enc_string(message) + enc_bytes(token)
        if version >= 1:
            out += struct.pack(">q", 0)  # session_lifetime_ms: no re-authentication
        if flexible:
            out += b"\x00"
        writer.write(response(correlation_id, out, flexible_header=flexible))
        await writer.drain()


# ---------------------------------------------------------------------------------------------
# Process


def parse_user(text):
    name, sep, password = text.partition(":")
    if not sep or not name:
        raise argparse.ArgumentTypeError("expected NAME:PASSWORD")
    return name, password


async def main():
    ap = argparse.ArgumentParser(
        description="SASL-terminating Kafka proxy (see the module docstring)."
    )
    ap.add_argument("--user", action="append", type=parse_user, default=[], required=True)
    add_upstream_arg(ap)
    ap.add_argument("--mechanisms", default=",".join(ALL_MECHANISMS))
    add_listen_args(ap)
    args = ap.parse_args()
    mechanisms = [m.strip() for m in args.mechanisms.split(",") if m.strip()]
    unknown = [m for m in mechanisms if m not in ALL_MECHANISMS]
    if unknown:
        ap.error(f"unsupported mechanisms {unknown}; choose from {ALL_MECHANISMS}")

    parent = os.getppid()
    listen_host, listen_port = parse_addr(args.listen)
    upstream = None if args.upstream == "-" else parse_addr(args.upstream)
    proxy = Proxy(dict(args.user), mechanisms, upstream)
    server = await asyncio.start_server(proxy.handle, listen_host, listen_port)
    users = ", ".join(sorted(proxy.users))
    return await serve(
        server,
        proxy,
        args,
        parent,
        lambda port: f"listening on {listen_host}:{port} (SASL {','.join(mechanisms)}; users: {users})",
        "after login",
    )


if __name__ == "__main__":
    run(main)
