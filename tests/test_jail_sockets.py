"""Issue 29, attack 1: socket families that go around the jail's network namespace. AF_VSOCK ignores
network namespaces (on a VM it reaches the hypervisor), AF_NETLINK talks to the host kernel, AF_PACKET
to raw links. In a real episode each must fail with EPERM or EAFNOSUPPORT, while AF_UNIX and AF_INET,
which the kernel's own sockets and ordinary code use, still work."""

from __future__ import annotations

import errno

import pytest

from jail_episode import play_attack
from tsbench.harness.runtime.seccomp import program

pytestmark = pytest.mark.timeout(180)

FAMILIES = """
import socket
def attempt(name, family, kind, pair=False):
    try:
        made = socket.socketpair(family, kind) if pair else [socket.socket(family, kind)]
    except OSError as exc:
        print('FAMILY', name, 'refused', exc.errno)
        return
    for sock in made:
        sock.close()
    print('FAMILY', name, 'made')
attempt('vsock', 40, socket.SOCK_STREAM)
attempt('vsock_pair', 40, socket.SOCK_STREAM, pair=True)
attempt('netlink', 16, socket.SOCK_RAW)
attempt('netlink_dgram', 16, socket.SOCK_DGRAM)
attempt('packet', 17, socket.SOCK_DGRAM)
attempt('bluetooth', 31, socket.SOCK_STREAM)
attempt('unix', socket.AF_UNIX, socket.SOCK_STREAM)
attempt('unix_pair', socket.AF_UNIX, socket.SOCK_STREAM, pair=True)
attempt('inet', socket.AF_INET, socket.SOCK_STREAM)
attempt('inet6', socket.AF_INET6, socket.SOCK_DGRAM)
a, b = socket.socketpair()
a.sendall(b'ping')
print('PAIR', b.recv(4))
"""


def test_only_unix_and_inet_sockets_can_be_made_in_the_jail():
    if program() is None:
        pytest.skip("no seccomp table for this architecture")
    _, observations = play_attack([FAMILIES, "print('STILL', 1 + 1)"])
    seen = observations[0]
    refused = {errno.EPERM, errno.EAFNOSUPPORT}
    for name in ("vsock", "vsock_pair", "netlink", "netlink_dgram", "packet", "bluetooth"):
        line = next((ln for ln in seen.splitlines() if ln.startswith(f"FAMILY {name} ")), "")
        assert line.startswith(f"FAMILY {name} refused"), (name, seen)
        assert int(line.split()[-1]) in refused, line
    for name in ("unix", "unix_pair", "inet", "inet6"):
        assert f"FAMILY {name} made" in seen, (name, seen)
    assert "PAIR b'ping'" in seen
    assert "STILL 2" in observations[1]  # the kernel's own (unix) sockets still carry the episode
