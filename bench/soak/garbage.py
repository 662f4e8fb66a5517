#!/usr/bin/env python3
"""Garbage sender for the soak test (issue 17): while an unkeyed `frugal launch` runs, keep sending
garbage to every listening TCP port of the launcher and of its children (the ranks' ROUTER sockets;
rank 0's is also the rendezvous port), and report what was sent.

Usage: garbage.py --launcher PID [--rate MSGS_PER_S] [--seed N] [--stats FILE] [--duration S]

Three kinds, chosen at random per connection:
  raw     random bytes over plain TCP (not ZMTP at all)
  zmtp    a valid ZMTP 3.0 greeting and NULL-mechanism READY as a DEALER, then random frames and
          multipart messages, some with a ZMTP length field far over FRUGAL_MAX_MESSAGE_BYTES
  frugal  the same handshake, then two-part messages shaped like frugal's frames: the 56-byte
          header with the right magic and version, random kind, op, src rank, tag, communicator,
          sequence, and a right or wrong header CRC32C, payload length and payload CRC32C; some
          truncated, some with extra parts

It never sends an exact forgery: the ZMTP routing id is never a member's ("r0".."r<N-1>"), because
in an unkeyed run a stranger that uses a member's routing id is that member as far as the ranks can
tell (that is what --cluster-key is for; comm/README.md, "Security"). With an unknown routing id, even a
frame with every checksum right must be dropped.

Ports are rediscovered four times a second, since ranks restarted by --max-restarts listen on new ports.
The sender stops when the launcher exits (or after --duration), and writes its counts as JSON.
"""
import argparse
import json
import os
import random
import select
import signal
import socket
import struct
import sys
import time

# --- CRC32C (Castagnoli, reflected 0x82F63B78), as core/crc32c.h ---------------------------------
_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the standard check value

# --- frugal's frame header (comm/frame.h): 56 bytes, little-endian ----------------------------------
FRAME_MAGIC = 0x4C475246
PROTOCOL_VERSION = 1
HEADER_BYTES = 56


def frugal_header(rng, payload):
    kind = rng.choice([1, 1, 1, 2, 2, 3, 4, 5, 6, 7, 8, 0, 9, 255])
    op = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, rng.randrange(256)])
    src = rng.choice([0, 1, 2, 3, rng.randrange(64), 0xFFFFFFFF])
    step = rng.randrange(1 << 32)  # the step of a collective, the tag of a p2p frame
    comm_id = rng.choice([0, 1, rng.randrange(1 << 64)])
    seq = rng.choice([0, 1, rng.randrange(1, 100000), rng.randrange(1 << 64)])
    part = rng.randrange(16)
    sig = rng.randrange(1 << 32)
    length = rng.choice(["right", "right", "short", "long", "huge"])
    payload_bytes = {"right": len(payload), "short": max(0, len(payload) - 1 - rng.randrange(8)),
                     "long": len(payload) + 1 + rng.randrange(1 << 20), "huge": rng.randrange(1 << 64)}[length]
    payload_crc = crc32c(payload) if rng.random() < 0.5 else rng.randrange(1 << 32)
    h = struct.pack("<IHBBIIQQIIQI", FRAME_MAGIC, PROTOCOL_VERSION, kind, op, src, step, comm_id, seq,
                    part, sig, payload_bytes, payload_crc)
    header_crc = crc32c(h) if rng.random() < 0.7 else rng.randrange(1 << 32)
    h += struct.pack("<I", header_crc)
    assert len(h) == HEADER_BYTES
    return h


# --- ZMTP 3.0 (rfc.zeromq.org/spec/23), NULL mechanism -------------------------------------------
def zmtp_greeting():
    return (b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\x00") + b"\x00" +
            b"\x00" * 31)


def zmtp_frame(body, more=False, command=False, announce=None):
    """One ZMTP frame. `announce` overrides the length field (an oversized or lying length)."""
    n = len(body) if announce is None else announce
    flags = (1 if more else 0) | (4 if command else 0)
    if n > 255:
        return bytes([flags | 2]) + struct.pack(">Q", n) + body
    return bytes([flags, n]) + body


def zmtp_ready(identity):
    def prop(name, value):
        return bytes([len(name)]) + name + struct.pack(">I", len(value)) + value
    return zmtp_frame(b"\x05READY" + prop(b"Socket-Type", b"DEALER") + prop(b"Identity", identity),
                      command=True)


def is_member_identity(ident, ranks):
    """Whether a rank would take `ident` for a member's (comm/zmq_transport.cpp, rank_of_routing_id)."""
    digits = ident[1:]
    return (ident[:1] == b"r" and digits.isdigit() and digits.isascii() and (digits == b"0" or digits[:1] != b"0")
            and int(digits) < ranks)


def stranger_identity(rng, ranks):
    """A ZMTP routing id that is no member's: members are exactly r0..r<ranks-1>."""
    while True:
        ident = random_identity(rng, ranks)
        if not is_member_identity(ident, ranks):  # random bytes can spell "r1"
            return ident


def random_identity(rng, ranks):
    choice = rng.randrange(5)
    if choice == 0:
        return b""  # the ROUTER makes one up
    if choice == 1:
        return b"r%d" % (ranks + rng.randrange(1000))
    if choice == 2:
        return b"x" + os.urandom(rng.randrange(1, 16)).hex().encode()
    if choice == 3:
        return b"r" + os.urandom(rng.randrange(1, 8))  # "r" and not digits
    return b"r-%d" % rng.randrange(10)


class Sender:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.stats = {"connections": 0, "refused": 0, "disconnected_by_rank": 0, "messages": 0, "bytes": 0,
                      "by_kind": {"raw": 0, "zmtp": 0, "frugal": 0}, "ports_seen": 0}
        self.ports_seen = set()
        self.tokens = 0.0
        self.last_refill = time.monotonic()

    # Rate limit (token bucket): a few hundred messages a second, so the garbage disturbs but
    # does not starve the ranks of CPU on a small machine.
    def take(self):
        while True:
            now = time.monotonic()
            self.tokens = min(self.args.rate, self.tokens + (now - self.last_refill) * self.args.rate)
            self.last_refill = now
            if self.tokens >= 1:
                self.tokens -= 1
                return
            time.sleep((1 - self.tokens) / self.args.rate)

    def send(self, sock, data, kind):
        self.take()
        sock.sendall(data)
        self.stats["messages"] += 1
        self.stats["bytes"] += len(data)
        self.stats["by_kind"][kind] += 1
        # Drain whatever the rank says (its greeting, READY) so its send buffer never fills.
        # (select, not MSG_DONTWAIT: a socket with a timeout waits for data before any recv.)
        while select.select([sock], [], [], 0)[0]:
            if not sock.recv(65536):
                raise ConnectionResetError("closed by the rank")

    def payload(self):
        n = self.rng.choice([0, 1, 8, 56, self.rng.randrange(512), self.rng.randrange(4096)])
        return os.urandom(n)

    def session(self, port):
        """One connection to `port`: a kind, a burst of messages, then close (or the rank closes it)."""
        kind = self.rng.choice(["raw", "zmtp", "frugal", "frugal"])
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=1.0)
        except OSError:
            self.stats["refused"] += 1
            return
        self.stats["connections"] += 1
        try:
            sock.settimeout(2.0)
            burst = self.rng.randrange(1, 40)
            if kind == "raw":
                for _ in range(burst):
                    self.send(sock, os.urandom(self.rng.randrange(1, 2048)), kind)
                return
            ident = stranger_identity(self.rng, self.args.ranks)
            self.send(sock, zmtp_greeting() + zmtp_ready(ident), kind)
            for _ in range(burst):
                if kind == "zmtp":
                    parts = [self.payload() for _ in range(self.rng.randrange(1, 5))]
                    msg = b"".join(zmtp_frame(p, more=i + 1 < len(parts)) for i, p in enumerate(parts))
                    if self.rng.random() < 0.05:  # a length far over the message-size limit
                        msg = zmtp_frame(b"", announce=(1 << 40) + self.rng.randrange(1 << 20))
                else:
                    body = self.payload()
                    header = frugal_header(self.rng, body)
                    shape = self.rng.randrange(10)
                    if shape == 0:    # truncated header
                        parts = [header[:self.rng.randrange(HEADER_BYTES)], body]
                    elif shape == 1:  # header only
                        parts = [header]
                    elif shape == 2:  # an extra part
                        parts = [header, body, self.payload()]
                    else:
                        parts = [header, body]
                    msg = b"".join(zmtp_frame(p, more=i + 1 < len(parts)) for i, p in enumerate(parts))
                self.send(sock, msg, kind)
        except OSError:
            self.stats["disconnected_by_rank"] += 1
        finally:
            sock.close()

    def discover(self):
        pids = [self.args.launcher] + children(self.args.launcher)
        ports = set()
        for pid in pids:
            ports |= listening_ports(pid)
        self.ports_seen |= ports
        self.stats["ports_seen"] = len(self.ports_seen)
        return sorted(ports)

    def run(self):
        start = time.monotonic()
        ports, found_at = [], 0.0
        while pid_alive(self.args.launcher):
            if self.args.duration and time.monotonic() - start > self.args.duration:
                break
            if time.monotonic() - found_at > 0.25:
                ports, found_at = self.discover(), time.monotonic()
            if not ports:
                time.sleep(0.1)
                continue
            self.session(self.rng.choice(ports))
        self.stats["seconds"] = round(time.monotonic() - start, 1)


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    return out


def listening_ports(pid):
    """TCP ports `pid` listens on: its socket inodes matched against /proc/<pid>/net/tcp{,6}."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return set()
    ports = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                        ports.add(int(cols[1].rsplit(":", 1)[1], 16))
        except (OSError, StopIteration):
            pass
    return ports


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--launcher", type=int, required=True, help="pid of `frugal launch`")
    p.add_argument("--ranks", type=int, default=4, help="ranks of the run (their routing ids are avoided)")
    p.add_argument("--rate", type=float, default=300, help="messages per second, at most")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--duration", type=float, default=0, help="stop after this many seconds (0: with the launcher)")
    p.add_argument("--stats", help="write the counts here as JSON")
    args = p.parse_args()
    sender = Sender(args)
    # The soak script stops the sender with SIGTERM when it no longer needs it: still write the counts.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        sender.run()
    except KeyboardInterrupt:
        pass
    text = json.dumps(sender.stats)
    if args.stats:
        with open(args.stats, "w") as f:
            f.write(text + "\n")
    print(f"garbage: {text}", file=sys.stderr)


if __name__ == "__main__":
    main()
