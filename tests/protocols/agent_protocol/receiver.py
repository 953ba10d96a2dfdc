"""A real local HTTP receiver of webhooks: it keeps what it was sent, and can fail or hold
the first requests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.server.support import WAIT


@dataclass
class Received:
    """One request the receiver got."""

    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """Return the body, decoded."""
        return json.loads(self.body)


@dataclass
class Receiver:
    """What the receiver got, and how it answers: `fail` first requests answer 500, and
    each waits for `release` while `hold` is set."""

    url: str = ""
    fail: int = 0
    hold: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    got: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, count: int) -> list[Received]:
        """Wait until `count` requests arrived; return them."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.got) >= count, WAIT):
                raise AssertionError(f"{len(self.got)} requests arrived, not {count}")
            return list(self.got)


@contextmanager
def receiving() -> Iterator[Receiver]:
    """Run a receiver on a free loopback port for the `with` block."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            with receiver.arrived:
                receiver.got.append(Received({k.lower(): v for k, v in self.headers.items()}, body))
                failing = len(receiver.got) <= receiver.fail
                receiver.arrived.notify_all()
            if receiver.hold:
                receiver.release.wait(WAIT * 3)  # longer than a test waits
            self.send_response(500 if failing else 204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.release.set()
        server.shutdown()
        server.server_close()
