"""A TCP proxy that puts a network link between a client and a server on loopback.

    python -m arcabench.delayproxy --listen 127.0.0.1:P --upstream 127.0.0.1:S \
        --delay 10ms --rate 100MB

What it models (what `tc qdisc add dev lo root netem delay 10ms rate 800mbit` would do on a
network namespace's loopback, on kernels that have netem; this machine's has not):
- a one-way propagation delay (`--delay`) in each direction, so a request/response round trip
  costs 2 x delay, and a new connection one more round trip (the TCP handshake) before its first
  request leaves;
- one link per direction shared by all connections, serialising bytes at `--rate` bytes/s
  (`LinkModel`): a chunk leaves when the link is free and arrives `delay` after its last byte
  left, so a long transfer runs at the rate and a burst of requests queues behind each other.
Pipelining is kept (a connection's bytes are scheduled as they arrive, not one at a time), and
backpressure is passed on: at most `--buffer` bytes per connection and direction wait in the
proxy before it stops reading that side.

Counters, printed as one JSON line on stdout for every line read on stdin ("stats"): bytes
client->server (`up_bytes`) and server->client (`down_bytes`), connections accepted, and HTTP/1.x
status lines seen server->client (`responses`: one per HTTP request; the bodies here are
encrypted or XML, where that byte string does not occur by chance).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import sys


def parse_duration(text: str) -> float:
    """'10ms' / '0.5s' / '250us' / '0' -> seconds."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(us|ms|s)?\s*", text)
    if not m:
        raise ValueError(f"bad duration {text!r}")
    return float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0}[m.group(2)]


def parse_rate(text: str) -> float:
    """'100MB' (bytes/s, SI), '800mbit', '1GiB', '0' (unlimited) -> bytes per second."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmg]?)(i?)(b|bit|)\s*", text, re.I)
    if not m:
        raise ValueError(f"bad rate {text!r}")
    num, prefix, binary, unit = float(m.group(1)), m.group(2).lower(), m.group(3), m.group(4)
    mult = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[prefix]
    if binary:
        mult = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}[prefix]
    if unit.lower() == "bit":
        mult /= 8
    return num * mult


class LinkModel:
    """One direction of a link: bytes leave one after another at `rate` bytes/s (0 = no limit)
    and arrive `delay` seconds after leaving. `arrival(now, n)` books n bytes handed to the link
    at time `now` and returns when their last byte arrives."""

    def __init__(self, delay: float, rate: float):
        self.delay = delay
        self.rate = rate
        self.free_at = 0.0  # when the link has sent everything booked so far

    def arrival(self, now: float, nbytes: int) -> float:
        start = max(now, self.free_at)
        done = start + (nbytes / self.rate if self.rate else 0.0)
        self.free_at = done
        return done + self.delay


STATUS = b"HTTP/1."


class Stats:
    def __init__(self):
        self.up_bytes = 0
        self.down_bytes = 0
        self.connections = 0
        self.responses = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class _Side(asyncio.Protocol):
    """One socket of a proxied connection. What it receives goes into its queue with the time
    the link delivers it, and is written to the peer side's socket then, in order."""

    def __init__(self, conn: "_Conn", link: LinkModel, direction: str):
        self.conn, self.link, self.direction = conn, link, direction
        self.transport = None
        self.peer: _Side | None = None
        self.queue = collections.deque()  # (arrival time, bytes, or None for end of stream)
        self.timer = None
        self.pending = 0  # bytes received here, not yet handed to the peer's transport
        self.paused = False  # reading paused (too much pending, or the peer cannot write)
        self.peer_blocked = False
        self.tail = b""

    def connection_made(self, transport):
        self.transport = transport
        transport.set_write_buffer_limits(high=self.conn.buffer)

    def _push(self, at: float, data):
        self.queue.append((at, data))
        if self.timer is None:
            self.timer = self.conn.loop.call_at(self.queue[0][0], self._flush)

    def _flush(self):
        self.timer = None
        loop = self.conn.loop
        now = loop.time()
        peer = self.peer
        alive = peer is not None and peer.transport is not None and not peer.transport.is_closing()
        while self.queue and self.queue[0][0] <= now + 0.0002:
            _, data = self.queue.popleft()
            if data is None:  # end of stream: close the other socket
                if alive:
                    peer.transport.close()
                alive = False
                continue
            self.pending -= len(data)
            if alive:
                peer.transport.write(data)
        if self.queue:
            self.timer = loop.call_at(self.queue[0][0], self._flush)
        self._update_reading()

    def data_received(self, data):
        stats = self.conn.stats
        n = len(data)
        at = self.link.arrival(self.conn.loop.time(), n)
        if self.direction == "up":
            stats.up_bytes += n
            at = max(at, self.conn.established_at + self.link.delay)
        else:
            stats.down_bytes += n
            stats.responses += (self.tail + data).count(STATUS)
            self.tail = data[-(len(STATUS) - 1):]
        self.pending += n
        self._push(at, data)
        self._update_reading()

    def _update_reading(self):
        t = self.transport
        if t is None or t.is_closing():
            return
        want_pause = self.pending > self.conn.buffer or self.peer_blocked
        if want_pause and not self.paused:
            t.pause_reading()
            self.paused = True
        elif not want_pause and self.paused:
            t.resume_reading()
            self.paused = False

    # Our transport's write buffer (data going out to this socket, from the peer side) is full:
    # the peer side stops reading until it drains.
    def pause_writing(self):
        if self.peer:
            self.peer.peer_blocked = True
            self.peer._update_reading()

    def resume_writing(self):
        if self.peer:
            self.peer.peer_blocked = False
            self.peer._update_reading()

    def eof_received(self):
        return False  # close this socket; the peer's closes when the queue has drained

    def connection_lost(self, exc):
        last = self.queue[-1][0] if self.queue else self.conn.loop.time()
        self._push(max(last, self.conn.loop.time() + self.link.delay), None)


class _Conn:
    def __init__(self, loop, stats, buffer, established_at):
        self.loop, self.stats, self.buffer = loop, stats, buffer
        self.established_at = established_at


class Proxy:
    def __init__(self, upstream: tuple, delay: float, rate: float, buffer: int = 4 << 20):
        self.upstream = upstream
        self.delay = delay
        self.buffer = buffer
        self.up = LinkModel(delay, rate)
        self.down = LinkModel(delay, rate)
        self.stats = Stats()

    async def handle(self, client_sock):
        loop = asyncio.get_running_loop()
        self.stats.connections += 1
        # The client's connect() returned at once (loopback); its first bytes may leave only
        # after the handshake's round trip (SYN, SYN-ACK) would have completed.
        conn = _Conn(loop, self.stats, self.buffer, loop.time() + 2 * self.delay)
        client = _Side(conn, self.up, "up")
        server = _Side(conn, self.down, "down")
        client.peer, server.peer = server, client
        try:
            await loop.connect_accepted_socket(lambda: client, client_sock)
            client.transport.pause_reading()  # until the upstream side exists
            client.paused = True
            await loop.create_connection(lambda: server, *self.upstream)
        except OSError:
            if client.transport:
                client.transport.close()
            return
        client._update_reading()

    async def serve(self, host: str, port: int, ready=None):
        import socket

        loop = asyncio.get_running_loop()
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((host, port))
        lsock.listen(512)
        lsock.setblocking(False)
        if ready:
            ready(lsock.getsockname()[1])
        while True:
            sock, _ = await loop.sock_accept(lsock)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            loop.create_task(self.handle(sock))


def _hostport(text: str) -> tuple:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: any free port; "
                   "the chosen one is printed as the first line: {\"port\": N})")
    p.add_argument("--upstream", required=True, help="HOST:PORT of the server")
    p.add_argument("--delay", default="10ms", help="one-way delay per direction (default 10ms)")
    p.add_argument("--rate", default="0", help="link rate per direction, e.g. 100MB (bytes/s) "
                   "or 800mbit; 0 = unlimited")
    p.add_argument("--buffer", type=int, default=4 << 20,
                   help="bytes per connection and direction held before reading pauses")
    a = p.parse_args(argv)
    proxy = Proxy(_hostport(a.upstream), parse_duration(a.delay), parse_rate(a.rate), a.buffer)

    def ready(port):
        print(json.dumps({"port": port}), flush=True)

    async def run():
        loop = asyncio.get_running_loop()
        stdin_done = loop.create_future()

        def on_stdin():
            line = sys.stdin.readline()
            if not line:
                loop.remove_reader(sys.stdin.fileno())
                if not stdin_done.done():
                    stdin_done.set_result(None)
                return
            sys.stdout.write(json.dumps(proxy.stats.to_dict()) + "\n")
            sys.stdout.flush()

        loop.add_reader(sys.stdin.fileno(), on_stdin)
        host, port = _hostport(a.listen)
        server = loop.create_task(proxy.serve(host, port, ready))
        await stdin_done  # stdin closed: the harness is gone; stop
        server.cancel()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
