"""Ports for the tests' servers, free when chosen and below the kernel's ephemeral range.

A port a server will bind a moment later (a subprocess given ``--metrics-port P``) must not be taken meanwhile.
Ports from ``bind(0)`` come from the ephemeral range, which outgoing connections (Ray's processes, the tests'
own clients) draw from too; ports below it are only ever taken by a server that binds them by number.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOWEST = 20000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_ports(n: int = 1) -> int:
    """P such that P … P+n-1 can all be bound on 127.0.0.1 now, below the ephemeral range."""
    top = _ephemeral_start() - n
    if top <= LOWEST:  # (a machine whose ephemeral range starts low: any free run will do)
        top = 65535 - n
    for _ in range(200):
        base = random.randrange(LOWEST, top)
        held = [socket.socket() for _ in range(n)]
        try:
            for k, sock in enumerate(held):
                sock.bind(("127.0.0.1", base + k))
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
        return base
    raise RuntimeError(f"no run of {n} free port(s) found")


def free_port() -> int:
    return free_ports(1)
