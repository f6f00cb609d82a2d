"""A loopback TCP proxy that can cut its connections: a network blip between a client and a real
server that both live through (a ZooKeeper session survives a dropped connection the client
re-opens within its timeout, which a stopped or frozen server does not show).

While held, what clients send is kept back from the server (and recorded, so a test can wait for
one exact request to be in flight); :meth:`TcpProxy.cut` then closes every connection, the
requests held never reach the server, and the clients' next connections are relayed as usual.
"""

from __future__ import annotations

import socket
import threading

__all__ = ["TcpProxy"]


class TcpProxy:
    """Relays ``127.0.0.1:<port>`` to ``upstream`` (``host:port``)."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._held = bytearray()
        self._holding = False
        self._arrived = threading.Condition(self._lock)
        self._stopped = False

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self._listener.getsockname()[1]}"

    def start(self) -> TcpProxy:
        threading.Thread(target=self._accept, name="tcp-proxy", daemon=True).start()
        return self

    def hold(self) -> None:
        """Keep back what clients send from now on."""
        with self._lock:
            self._holding, self._held = True, bytearray()

    def wait_held(self, data: bytes, timeout_s: float = 30.0) -> None:
        """Until ``data`` is among the bytes held back (a request in flight, unanswered)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: data in self._held, timeout_s):
                raise TimeoutError(f"{data!r} never reached the proxy")

    def cut(self) -> None:
        """Close every connection (what was held is lost) and relay new ones again."""
        with self._lock:
            doomed, self._open, self._holding = self._open, [], False
        for s in doomed:
            _close(s)

    def stop(self) -> None:
        self._stopped = True
        self.cut()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self._upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while chunk := source.recv(65536):
                with self._lock:
                    if from_client and self._holding:
                        self._held += chunk
                        self._arrived.notify_all()
                        continue
                sink.sendall(chunk)
        except OSError:
            pass
        _close(source)
        _close(sink)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
