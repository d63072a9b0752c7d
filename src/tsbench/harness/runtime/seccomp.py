"""The jail's system-call filter: a classic-BPF seccomp program that bubblewrap installs (`--seccomp FD`)
just before it runs the kernel.

A deny list, close to what container runtimes refuse an unprivileged process by default: calls that
debug or read other processes (ptrace, process_vm_*, kcmp, pidfd_getfd), change namespaces or mounts
(unshare, setns, mount and the new mount API, pivot_root, chroot), reach kernel subsystems with a
long record of privilege escalations (bpf, perf_event_open, userfaultfd, io_uring, keyrings), and
touch the machine (modules, kexec, reboot, clocks, swap, quotas). A denied call fails with EPERM; the
analysis stack (Python, numpy, pandas, numba, matplotlib, ipykernel) uses none of them.

Plus an allow-list of socket families: socket() and socketpair() make only AF_UNIX, AF_INET and AF_INET6
sockets (the kernel's own zmq sockets are unix ones; inet ones are unroutable in the jail's empty network
namespace; ipykernel's tcp pipe for forked children's output, whose bind needs netlink, is switched off
in kernel_boot.py). Every other family fails with EAFNOSUPPORT: AF_VSOCK ignores network namespaces and reaches
the hypervisor on a VM, AF_NETLINK talks to the host kernel's subsystems, AF_PACKET to raw links.

Built by hand (the program is a few dozen instructions) so nothing beyond the standard library is
needed. Only x86_64 has a table here: 32-bit (i386) and x32 system calls are refused as a whole, and on
another architecture `program()` returns None and the jail runs without a filter.
"""

from __future__ import annotations

import errno
import platform
import struct

# linux/audit.h and linux/seccomp.h
AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
# classic BPF opcodes (linux/filter.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # struct seccomp_data

DENIED_X86_64 = {
    "ptrace": 101,
    "syslog": 103,
    "vhangup": 153,
    "pivot_root": 155,
    "adjtimex": 159,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "sethostname": 170,
    "setdomainname": 171,
    "iopl": 172,
    "ioperm": 173,
    "create_module": 174,
    "init_module": 175,
    "delete_module": 176,
    "get_kernel_syms": 177,
    "query_module": 178,
    "quotactl": 179,
    "nfsservctl": 180,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
}


# socket(2) and socketpair(2) may only make these families; others fail as an unsupported family would.
SOCKET_CALLS_X86_64 = {"socket": 41, "socketpair": 53}
ALLOWED_FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}
_ARG0_LOW_OFFSET = 16  # the low 32 bits of args[0] (little-endian); the kernel reads the family as an int


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build(
    denied: dict[str, int],
    arch: int,
    socket_calls: dict[str, int] | None = None,
    families: dict[str, int] | None = None,
) -> bytes:
    """The filter: other architectures and x32 calls denied, the listed numbers denied, socket calls
    allowed only for `families` (EAFNOSUPPORT otherwise), the rest allowed.

    Written with symbolic jump targets (a label name in place of a branch offset), resolved below."""
    numbers = sorted(set(denied.values()))
    socket_numbers = sorted(set((socket_calls or {}).values()))
    allowed = sorted(set((families or {}).values()))
    body: list[tuple] = [
        (_LD_W_ABS, 0, 0, _ARCH_OFFSET),
        (_JEQ_K, 0, "deny", arch),
        (_LD_W_ABS, 0, 0, _NR_OFFSET),
        (_JGE_K, "deny", 0, X32_SYSCALL_BIT),
        *((_JEQ_K, "deny", 0, nr) for nr in numbers),
        *((_JEQ_K, "family", 0, nr) for nr in socket_numbers),
        (_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    if socket_numbers:  # BPF jumps only forward: the family check has its own allow
        body += [
            ("family:", _LD_W_ABS, 0, 0, _ARG0_LOW_OFFSET),
            *((_JEQ_K, "family_allowed", 0, family) for family in allowed),
            (_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EAFNOSUPPORT),
            ("family_allowed:", _RET_K, 0, 0, SECCOMP_RET_ALLOW),
        ]
    body.append(("deny:", _RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM))
    labels = {insn[0][:-1]: i for i, insn in enumerate(body) if isinstance(insn[0], str)}
    out = []
    for i, insn in enumerate(body):
        code, jt, jf, k = insn[1:] if isinstance(insn[0], str) else insn
        jt, jf = (labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise ValueError("filter too long for 8-bit BPF jumps")
        out.append(_insn(code, jt, jf, k))
    return b"".join(out)


def program() -> bytes | None:
    """The filter for this machine, or None where there is no table (not x86_64)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    return build(DENIED_X86_64, AUDIT_ARCH_X86_64, SOCKET_CALLS_X86_64, ALLOWED_FAMILIES)
