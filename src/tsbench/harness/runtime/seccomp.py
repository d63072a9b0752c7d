"""The jail's system-call filter: a classic-BPF seccomp program that bubblewrap installs (`--seccomp FD`)
just before it runs the kernel.

A deny list, close to what container runtimes refuse an unprivileged process by default: calls that
debug or read other processes (ptrace, process_vm_*, kcmp, pidfd_getfd), change namespaces or mounts
(unshare, setns, mount and the new mount API, pivot_root, chroot), reach kernel subsystems with a
long record of privilege escalations (bpf, perf_event_open, userfaultfd, io_uring, keyrings), and
touch the machine (modules, kexec, reboot, clocks, swap, quotas). A denied call fails with EPERM; the
analysis stack (Python, numpy, pandas, numba, matplotlib, ipykernel) uses none of them.

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
    "ptrace": 101, "syslog": 103, "vhangup": 153, "pivot_root": 155, "adjtimex": 159, "chroot": 161,
    "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
    "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173,
    "create_module": 174, "init_module": 175, "delete_module": 176, "get_kernel_syms": 177,
    "query_module": 178, "quotactl": 179, "nfsservctl": 180, "lookup_dcookie": 212, "clock_settime": 227,
    "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
    "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304, "clock_adjtime": 305,
    "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
    "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "pidfd_getfd": 438, "mount_setattr": 442,
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build(denied: dict[str, int], arch: int) -> bytes:
    """The filter: other architectures and x32 calls denied, the listed numbers denied, the rest allowed."""
    numbers = sorted(set(denied.values()))
    body = [
        (_LD_W_ABS, 0, 0, _ARCH_OFFSET),
        (_JEQ_K, 1, 0, arch),  # our architecture: skip the next instruction
        None,  # jump to deny (filled below)
        (_LD_W_ABS, 0, 0, _NR_OFFSET),
        (_JGE_K, 0, 0, X32_SYSCALL_BIT),  # jt filled below
        *((_JEQ_K, 0, 0, nr) for nr in numbers),  # jt filled below
        (_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        (_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM),
    ]
    deny = len(body) - 1
    out = []
    for i, insn in enumerate(body):
        if insn is None:  # an unconditional jump is JEQ with both branches to deny
            insn = (_JEQ_K, deny - i - 1, deny - i - 1, 0)
        elif insn[0] in (_JGE_K, _JEQ_K) and i > 1:
            insn = (insn[0], deny - i - 1, 0, insn[3])
        out.append(_insn(*insn))
    if deny > 255:
        raise ValueError("deny list too long for 8-bit BPF jumps")
    return b"".join(out)


def program() -> bytes | None:
    """The filter for this machine, or None where there is no table (not x86_64)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    return build(DENIED_X86_64, AUDIT_ARCH_X86_64)
