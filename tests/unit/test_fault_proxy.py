"""The fault proxy forwards byte for byte when no rule picks a request, and injects exactly what a
rule says when one does (a proxy that altered requests would fail the tests built on it, not the
service)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from tests.support.fault_proxy import Delay, FaultProxy, Hold, Reset, Rule, slow_down, store_error

pytestmark = pytest.mark.unit


class _Echo(BaseHTTPRequestHandler):
    """Answers every request with its method, path, Host header and the sha256 of its body
    (read by Content-Length or chunks), chunked when asked to with ``?chunked``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_PUT(self) -> None:
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            body = b""
            while size := int(self.rfile.readline().strip(), 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        answer = f"{self.command} {self.path} {self.headers['Host']} {hashlib.sha256(body).hexdigest()}".encode()
        self.send_response(200)
        if "chunked" in self.path:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (answer[:10], answer[10:]):
                self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    do_GET = do_POST = do_PUT


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    with FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}") as proxy:
        yield proxy
    upstream.shutdown()
    upstream.server_close()


@pytest.mark.parametrize("path", ["/a/b?x=1", "/a/b?chunked"])
def test_bodies_and_headers_pass_unchanged_both_ways(proxy, path):
    body = bytes(range(256)) * 4000
    with requests.Session() as session:  # one keep-alive connection through the proxy
        sized = session.put(proxy.url + path, data=body)
        chunked = session.put(proxy.url + path, data=iter([body[:1000], body[1000:]]))
    digest = hashlib.sha256(body).hexdigest()
    host = proxy.url.removeprefix("http://")
    assert sized.text == chunked.text == f"PUT {path} {host} {digest}"
    assert proxy.injected == {}


def test_a_rule_answers_its_share_of_matching_requests_only(proxy):
    rule = proxy.add(Rule(slow_down("/bucket/key"), method="PUT", path=r"^/bucket/", times=2))
    proxy.add(Rule(store_error(500, "INTERNAL"), method="GET", share=0.0))
    codes = [requests.put(proxy.url + "/bucket/key", data=b"x").status_code for _ in range(3)]
    assert codes == [503, 503, 200] and rule.injected == 2
    answer = requests.put(proxy.url + "/other", data=b"x")
    assert answer.status_code == 200 and requests.get(proxy.url + "/bucket").status_code == 200
    assert proxy.injected == {"respond": 2}
    assert b"<Code>SlowDown</Code>" in slow_down().body


def test_reset_hold_and_delay(proxy):
    proxy.add(Rule(Reset(), path="^/reset$", times=1))
    with pytest.raises(requests.ConnectionError):
        requests.get(proxy.url + "/reset")
    hold = proxy.add(Rule(Hold(), path="^/held$", times=1)).action
    answers: list[int] = []
    waiter = threading.Thread(target=lambda: answers.append(requests.get(proxy.url + "/held").status_code))
    waiter.start()
    hold.wait_arrived(10)
    assert answers == []
    hold.release()
    waiter.join(10)
    proxy.add(Rule(Delay(0.2), path="^/slow$"))
    assert answers == [200] and requests.get(proxy.url + "/slow", timeout=5).status_code == 200
    assert proxy.injected == {"reset": 1, "hold": 1, "delay": 1}


def test_an_upstream_that_is_gone_resets_the_client():
    with FaultProxy("http://127.0.0.1:9") as proxy, pytest.raises(requests.ConnectionError):
        requests.get(proxy.url + "/", timeout=5)
    assert proxy.injected == {"upstream_unreachable": 1}
