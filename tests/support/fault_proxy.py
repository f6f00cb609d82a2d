"""An HTTP reverse proxy that injects faults between a client and a real server.

Failure mode it exists for: a dependency that answers badly (a 503 storm, a reset connection, a
stall) is not the same as one that is down, and a real server cannot be told to misbehave on the
third ``PUT`` of one table. The proxy sits on loopback (a free port) in front of an upstream
URL and forwards every request byte for byte: headers kept as sent (``Host`` included, so an S3
signature still verifies), bodies streamed both ways with their own framing (``Content-Length``,
``chunked``, or until close), keep-alive connections kept. Rules, changed while it runs, pick
requests by method and path pattern and by share, and answer a status instead
(:func:`slow_down`, :func:`store_error`), reset the connection (before the request reaches the
upstream, or after, when only the answer is lost), delay it, or hold it until the test
releases it (:class:`Hold`: an exact point of a round, for a test that freezes a process
there). Every injection is counted, per rule and per kind. An upstream that refuses the
connection resets the client's: through the proxy, a dead server still looks dead.

Protocol-neutral on purpose: the KV store's tests and the S3 tests share it.
"""

from __future__ import annotations

import json
import random
import re
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import BinaryIO
from urllib.parse import urlsplit

__all__ = ["FaultProxy", "Rule", "Respond", "Reset", "Delay", "Hold", "slow_down", "store_error"]

_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Respond:
    """Answer ``status`` with ``body`` instead of forwarding (the request body is read and dropped)."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain"
    kind = "respond"


@dataclass(frozen=True)
class Reset:
    """Reset the client's connection (RST): before forwarding, or ``after_forward`` (the upstream
    acted on the request, its answer is lost)."""

    after_forward: bool = False
    kind = "reset"


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds``, then forward."""

    seconds: float
    kind = "delay"


@dataclass
class Hold:
    """Keep a request until :meth:`release` (or the proxy stops), then forward it. ``arrived`` is
    set when the first held request is in: the test acts (freezes a process), then releases."""

    arrived: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    kind = "hold"

    def wait_arrived(self, timeout_s: float = 60.0) -> None:
        if not self.arrived.wait(timeout_s):
            raise AssertionError(f"no request reached the hold within {timeout_s}s")

    def release(self) -> None:
        self.released.set()


Action = Respond | Reset | Delay | Hold


def slow_down(path: str = "/") -> Respond:
    """S3's 503 ``SlowDown``, as S3 sends it."""
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code><Message>Please reduce your request '
        f"rate.</Message><Resource>{path}</Resource><RequestId>fault-proxy</RequestId></Error>"
    )
    return Respond(503, body.encode(), "application/xml")


def store_error(status: int = 503, code: str = "UNAVAILABLE", message: str = "injected by the fault proxy") -> Respond:
    """The KV store's JSON error envelope (docs/DESIGN.md §3)."""
    return Respond(status, json.dumps({"error": code, "message": message}).encode(), "application/json")


@dataclass
class Rule:
    """Requests whose method and path (with the query) match, a ``share`` of them, at most
    ``times`` in all (None: no limit), get ``action``. ``injected`` counts them."""

    action: Action
    method: str | None = None
    path: str | None = None
    share: float = 1.0
    times: int | None = None
    injected: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (
            (self.method is None or self.method == method)
            and (self.path is None or re.search(self.path, path) is not None)
            and (self.times is None or self.injected < self.times)
        )


class FaultProxy:
    """``url`` forwards to ``upstream``; :meth:`add` a :class:`Rule`, :meth:`clear` them all.
    ``seed`` fixes which requests a ``share`` picks."""

    def __init__(self, upstream: str, seed: int = 0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the fault proxy forwards plain http only, got {upstream!r}")
        self.upstream = (parts.hostname, parts.port or 80)
        self.requests = 0
        self.injected: Counter[str] = Counter()
        self._rules: list[Rule] = []
        self._holds: list[Hold] = []
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; held requests are let go first so no client hangs on the proxy."""
        for hold in self._holds:
            hold.release()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
            if isinstance(rule.action, Hold):
                self._holds.append(rule.action)
        return rule

    def remove(self, rule: Rule) -> None:
        with self._lock:
            self._rules.remove(rule)

    def clear(self) -> None:
        """Drop every rule (held requests stay held until released)."""
        with self._lock:
            self._rules.clear()

    def _pick(self, method: str, path: str) -> Action | None:
        """The first matching rule that draws this request; counts it."""
        with self._lock:
            self.requests += 1
            for rule in self._rules:
                if rule.matches(method, path) and self._rng.random() < rule.share:
                    rule.injected += 1
                    self.injected[rule.action.kind] += 1
                    return rule.action
        return None

    def _count(self, kind: str) -> None:
        with self._lock:
            self.injected[kind] += 1


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(_ProxyHandler):
        pass

    Handler.proxy = proxy
    return Handler


class _ProxyHandler(BaseHTTPRequestHandler):
    """One client connection: each request is matched against the rules, then forwarded on this
    connection's own upstream connection (opened on first use, reopened when the upstream closed it)."""

    protocol_version = "HTTP/1.1"
    proxy: FaultProxy
    _upstream: socket.socket | None = None
    _upstream_in: BinaryIO | None = None

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def finish(self) -> None:
        self._close_upstream()
        try:
            super().finish()
        except OSError:  # a connection this proxy reset
            pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (TimeoutError, ConnectionError):
            self.close_connection = True

    def __getattr__(self, name: str):
        if name.startswith("do_"):  # every method, whatever its name
            return self._forward
        raise AttributeError(name)

    def _forward(self) -> None:
        action = self.proxy._pick(self.command, self.path)
        if isinstance(action, Delay):
            time.sleep(action.seconds)
        elif isinstance(action, Hold):
            action.arrived.set()
            action.released.wait()
        elif isinstance(action, Respond):
            self._drain_body()
            self.send_response(action.status)
            self.send_header("Content-Type", action.content_type)
            self.send_header("Content-Length", str(len(action.body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(action.body)
            return
        elif isinstance(action, Reset) and not action.after_forward:
            self._reset()
            return
        try:
            upstream = self._connect()
        except OSError:
            self.proxy._count("upstream_unreachable")
            self._reset()
            return
        try:
            self._send_request(upstream)
            if isinstance(action, Reset):
                self._read_status_and_headers()  # the upstream answered; the client never hears it
                self._close_upstream()
                self._reset()
                return
            self._relay_response()
        except OSError:  # the upstream died mid-exchange: so does the client's connection
            self._close_upstream()
            self._reset()

    # -- upstream side ---------------------------------------------------------------------

    def _connect(self) -> socket.socket:
        if self._upstream is None:
            self._upstream = socket.create_connection(self.proxy.upstream, timeout=300)
            self._upstream_in = self._upstream.makefile("rb")
        return self._upstream

    def _close_upstream(self) -> None:
        if self._upstream is not None:
            self._upstream_in.close()
            self._upstream.close()
            self._upstream = self._upstream_in = None

    def _send_request(self, upstream: socket.socket) -> None:
        """The request line and headers as received (``Expect`` answered here already), then the body."""
        head = [f"{self.command} {self.path} {self.request_version}\r\n".encode("latin-1")]
        head += [f"{k}: {v}\r\n".encode("latin-1") for k, v in self.headers.items() if k.lower() != "expect"]
        upstream.sendall(b"".join(head) + b"\r\n")
        _copy_body(
            self.rfile,
            upstream.sendall,
            self.headers.get("Transfer-Encoding"),
            self.headers.get("Content-Length"),
            until_close=False,
        )

    def _read_status_and_headers(self) -> tuple[int, list[bytes]]:
        """The upstream's answer up to its body; interim ``1xx`` answers are skipped."""
        while True:
            lines = [self._upstream_in.readline(_CHUNK)]
            if not lines[0]:
                raise ConnectionResetError("the upstream closed the connection")
            while lines[-1] not in (b"\r\n", b"\n", b""):
                lines.append(self._upstream_in.readline(_CHUNK))
            status = int(lines[0].split()[1])
            if not 100 <= status < 200:
                return status, lines

    def _relay_response(self) -> None:
        status, lines = self._read_status_and_headers()
        self.wfile.write(b"".join(lines))
        headers = {}
        for line in lines[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if self.command == "HEAD" or status in (204, 304):
            framed = True
        else:
            framed = _copy_body(
                self._upstream_in,
                self.wfile.write,
                headers.get("transfer-encoding"),
                headers.get("content-length"),
                until_close=True,
            )
        self.wfile.flush()
        if not framed or headers.get("connection", "").lower() == "close":
            self._close_upstream()
            self.close_connection = True

    # -- client side -----------------------------------------------------------------------

    def _drain_body(self) -> None:
        _copy_body(
            self.rfile,
            lambda data: None,
            self.headers.get("Transfer-Encoding"),
            self.headers.get("Content-Length"),
            until_close=False,
        )

    def _reset(self) -> None:
        """Close the client's connection with a RST (SO_LINGER 0), as a crashed server would."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()


def _copy_body(
    source: BinaryIO, write, transfer_encoding: str | None, content_length: str | None, *, until_close: bool
) -> bool:
    """Copy one message body, framing included (chunks verbatim, trailers too); False when it was
    framed by the connection's close (read to the end)."""
    if transfer_encoding and "chunked" in transfer_encoding.lower():
        while True:
            size_line = source.readline(_CHUNK)
            if not size_line:
                raise ConnectionResetError("the body ended inside a chunk header")
            write(size_line)
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the blank line
                    trailer = source.readline(_CHUNK)
                    write(trailer)
                    if trailer in (b"\r\n", b"\n", b""):
                        return True
            _copy_exactly(source, write, size + 2)  # the chunk and its CRLF
    if content_length is not None:
        _copy_exactly(source, write, int(content_length))
        return True
    if until_close:
        while data := source.read1(_CHUNK) if hasattr(source, "read1") else source.read(_CHUNK):
            write(data)
        return False
    return True


def _copy_exactly(source: BinaryIO, write, n: int) -> None:
    while n > 0:
        data = source.read(min(n, _CHUNK))
        if not data:
            raise ConnectionResetError(f"the body ended {n} bytes short")
        write(data)
        n -= len(data)


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.support.fault_proxy UPSTREAM --delay-ms N``: a proxy in a process of its
    own (a benchmark's latency must not take the GIL of the process it measures) that delays
    every request; prints its URL on stdout, then serves until it is killed."""
    import argparse

    parser = argparse.ArgumentParser(description="an HTTP proxy delaying every request")
    parser.add_argument("upstream")
    parser.add_argument("--delay-ms", type=float, required=True)
    args = parser.parse_args(argv)
    proxy = FaultProxy(args.upstream).start()
    proxy.add(Rule(Delay(args.delay_ms / 1000)))
    print(proxy.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
