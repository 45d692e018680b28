"""A fault-injecting TCP proxy on 127.0.0.1, for tests that put a database out of reach.

``FaultProxy(port)`` forwards connections made to its own port to ``127.0.0.1:port`` and
can, at any moment:

- :meth:`reset`: end every open connection with a TCP reset (both sides);
- :meth:`refuse` / :meth:`accept`: close its listening socket (new connections are refused)
  and open it again on the same port;
- :meth:`stall` / :meth:`flow`: hold all traffic, on open and new connections, without
  closing anything, then deliver what was held;
- :meth:`silence`: make the connections open now go silent for good (what is sent on them is
  never delivered, nothing is closed) while new connections work; :attr:`silent_from` makes
  new connections silent from the Nth on;
- :meth:`cut` / :meth:`restore`: reset everything and refuse new connections, then accept
  them again.

One thread accepts, two threads pump each connection; every wait is bounded, and
:meth:`close` ends them all.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time

__all__ = ["FaultProxy"]

_LINGER_RESET = struct.pack("ii", 1, 0)
"""``SO_LINGER`` on, zero seconds: closing the socket sends a reset."""


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    with contextlib.suppress(OSError):
        sock.close()


class _Link:
    """One proxied connection: the client's socket and the server's."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.silent = False
        self.closed = threading.Event()

    def dropping(self) -> bool:
        """Silent now (checked again after a read: the fault may have come meanwhile)."""
        return self.silent

    def close(self, *, reset: bool) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.server):
            if reset:
                _reset(sock)
            else:
                with contextlib.suppress(OSError):
                    sock.close()


class FaultProxy:
    """A TCP proxy from ``127.0.0.1:self.port`` to ``127.0.0.1:target_port`` with faults."""

    def __init__(self, target_port: int, *, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self.connections = 0
        """Connections accepted so far."""
        self.silent_from: int | None = None
        """Connections accepted from this number on (1 is the first) are silent at once."""
        self._listener: socket.socket | None = None
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> FaultProxy:
        self._listen()
        return self

    def url(self, database_url: str) -> str:
        """``database_url`` (pointing at the target) sent through the proxy instead."""
        host, port = self.target
        return database_url.replace(f"@{host}:{port}/", f"@127.0.0.1:{self.port}/")

    # Faults.

    def reset(self) -> int:
        """Reset every open connection; how many there were."""
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close(reset=True)
        return len(links)

    def refuse(self) -> None:
        """Close the listening socket: new connections are refused until :meth:`accept`."""
        with self._lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.close()

    def accept(self) -> None:
        """Listen again, on the same port."""
        if self._listener is None:
            self._listen()

    def stall(self) -> None:
        """Hold the traffic of every connection, open or new, until :meth:`flow`."""
        self._flowing.clear()

    def flow(self) -> None:
        """Deliver the held traffic and forward again."""
        self._flowing.set()

    def silence(self) -> int:
        """The connections open now go silent for good; new ones work. How many."""
        with self._lock:
            links = list(self._links)
        for link in links:
            link.silent = True
        return len(links)

    def cut(self) -> None:
        """Refuse new connections and reset the open ones."""
        self.refuse()
        self.reset()

    def restore(self) -> None:
        """Back to forwarding: accept connections and let traffic flow."""
        self.flow()
        self.accept()

    def open_links(self) -> int:
        with self._lock:
            return sum(1 for link in self._links if not link.closed.is_set())

    def close(self) -> None:
        self._closed.set()
        self.refuse()
        self.flow()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close(reset=False)
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Plumbing.

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        self._spawn(self._accept_loop, listener)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._closed.is_set() and self._listener is listener:
            try:
                ready, _, _ = select.select([listener], [], [], 0.1)
                if not ready:
                    continue
                client, _ = listener.accept()
            except (OSError, ValueError):
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                _reset(client)
                continue
            for sock in (client, server):  # each read forwarded at once, as both ends send
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _Link(client, server)
            with self._lock:
                self._links.append(link)
                self.connections += 1
                link.silent = self.silent_from is not None and self.connections >= self.silent_from
            self._spawn(self._pump, link, client, server)
            self._spawn(self._pump, link, server, client)

    def _pump(self, link: _Link, source: socket.socket, sink: socket.socket) -> None:
        while not link.closed.is_set() and not self._closed.is_set():
            if link.silent or not self._flowing.is_set():
                time.sleep(0.05)
                continue
            try:
                ready, _, _ = select.select([source], [], [], 0.1)
                if not ready:
                    continue
                data = source.recv(65536)
                if not data:
                    break
                if link.dropping():
                    continue  # read as it went silent: never delivered
                while not self._flowing.is_set() and not link.closed.is_set():
                    time.sleep(0.05)
                sink.sendall(data)
            except (OSError, ValueError):
                break
        with self._lock:
            if link in self._links:
                self._links.remove(link)
        link.close(reset=False)
