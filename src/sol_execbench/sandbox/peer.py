"""Who is on the other end of a Unix socket: the warm pool serves no sandboxed process.

Landlock (ABI 7 and below) still lets a restricted process connect to a pathname Unix socket, and
the pool's sockets live in a folder every process of the user can read. A sandboxed child could
take a warm child and hand it a job of its own, which would run outside any sandbox. Every sandbox
here sets ``no_new_privs`` (Landlock requires it, bubblewrap sets it), which no descendant can
clear; so a peer whose ``/proc/<pid>/status`` says ``NoNewPrivs: 1`` when this process's does not
is refused. A server that itself runs with ``no_new_privs`` (a container started with
``no-new-privileges``) cannot tell its peers apart, and refuses every peer that has it.
"""

from __future__ import annotations

import socket
import struct


def _no_new_privs(pid: int | str) -> bool | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("NoNewPrivs:"):
                    return line.split()[1] == "1"
    except OSError:
        return None
    return None


def peer_pid(conn: socket.socket) -> int | None:
    try:
        pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                             struct.calcsize("3i")))
    except OSError:
        return None
    return pid


def refusal(conn: socket.socket) -> str | None:
    """Why the peer of ``conn`` may not be served (it may be sandboxed), or None."""
    pid = peer_pid(conn)
    if pid is None:
        return "the peer's credentials cannot be read"
    peer = _no_new_privs(pid)
    if peer is None:
        return f"the peer (pid {pid}) cannot be inspected"
    if peer:
        return f"the peer (pid {pid}) runs with no_new_privs, as every sandboxed child does"
    return None
