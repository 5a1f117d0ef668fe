"""A rerank service stub on loopback: a real HTTP server in a thread, with scriptable answers."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    """One request as the stub received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """What to answer: status, body, an optional wait before answering (or after a partial body)."""

    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    partial: int | None = None  # send only this many body bytes, then wait ``delay``
    chunked: bool = False
    drip: float | None = None  # send the body one byte at a time, this many seconds apart


Behaviour = Callable[[Seen], Reply]


def results(indices: list[Any]) -> Reply:
    """``{"results":[{"index":i,"relevance_score":...},...]}`` with the given index values."""
    entries = [{"index": index, "relevance_score": 1.0 / (n + 1)} for n, index in enumerate(indices)]
    return Reply(body=json.dumps({"results": entries}).encode())


def reversing(seen: Seen) -> Reply:
    """Answer the reversed permutation of the documents sent."""
    return results(list(reversed(range(len(seen.json["documents"])))))


class StubServer:
    """``ThreadingHTTPServer`` on 127.0.0.1:0; ``behaviour`` decides each answer; ``requests`` records them."""

    def __init__(self, behaviour: Behaviour = reversing) -> None:
        self.behaviour = behaviour
        self.requests: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                seen = Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, self.rfile.read(length))
                with stub._lock:
                    stub.requests.append(seen)
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    stub._answer(self, stub.behaviour(seen))
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/rerank"

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.delay and reply.partial is None:
            self._stop.wait(reply.delay)
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.chunked:
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            step = 64 * 1024
            for start in range(0, len(reply.body), step):
                piece = reply.body[start : start + step]
                handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            handler.wfile.write(b"0\r\n\r\n")
            return
        handler.send_header("Content-Length", str(len(reply.body)))
        handler.end_headers()
        if reply.drip is not None:
            for byte in reply.body:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                if self._stop.wait(reply.drip):
                    return
            return
        if reply.partial is not None:
            handler.wfile.write(reply.body[: reply.partial])
            handler.wfile.flush()
            self._stop.wait(reply.delay)
            return
        handler.wfile.write(reply.body)

    def close(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/rerank"


class FakeClock:
    """A settable monotonic clock for the breaker."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def elapsed(since: float) -> float:
    return time.perf_counter() - since
