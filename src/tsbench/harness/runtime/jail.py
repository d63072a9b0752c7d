"""The jail every kernel runs in: a bubblewrap command line built in host memory.

Inside the jail (spec/harness.md, "Limits"):

* new user, mount, PID, network, IPC, UTS (and cgroup, where possible) namespaces; no
  capabilities in any set, no_new_privs; uid/gid 65534. On root hosts the host writes the user
  namespace's map itself (bwrap's --userns-block-fd handshake) so that uid 65534 is a throw-away
  host uid, not host root: host files keep their owners' permissions and RLIMIT_NPROC binds
  (the kernel ignores it for host root). Nested user namespaces are refused.
* a read-only root made of: the interpreter's prefix, the virtualenv, the system library
  directories, a minimal /etc written here (passwd, group, hosts, nsswitch.conf, plus the host's
  ld.so.cache), the launcher script, and anything the caller copied in by value;
  nothing else of the host: no data, results, journals, home or /root;
* a fresh /proc (only the jail's own processes) and a minimal /dev;
* private size-capped tmpfs mounts: the working directory (WORKDIR, the per-episode disk quota),
  /tmp and /dev/shm; files enter the working directory by value (copied from host file
  descriptors) or as a read-only bind of a host file only the host writes (context.json);
* the ipc transport's socket directory, the one host directory in the jail. The kernel can write
  there only while it binds its sockets (on root hosts the directory then goes back to root; where
  the kernel shares the host's uid it stays writable, bounded by RLIMIT_FSIZE per file only). The
  host only ever connects to sockets there; the connection file and the launch command stay outside.

* a seccomp filter (runtime/seccomp.py, x86_64): system calls that debug other processes, change
  namespaces or mounts, or reach bpf, perf, userfaultfd, io_uring, keyrings, modules or the clock
  fail with EPERM; 32-bit and x32 calls are refused; socket() and socketpair() make only AF_UNIX,
  AF_INET and AF_INET6 sockets (vsock, netlink, packet and the rest fail with EAFNOSUPPORT).

Not done: the jail's pid 1 (bwrap) shows the host paths of the binds in its cmdline; no seccomp table
for architectures other than x86_64.

`check_jail()` is the cheap preflight: it starts a jail running `python -c pass` once per process
and raises SandboxError with one line saying why it failed and how to fix it.
"""

from __future__ import annotations

import functools
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tsbench.harness.runtime import orphans
from tsbench.harness.runtime.errors import SandboxError
from tsbench.harness.runtime.limits import EpisodeCgroup

__all__ = ["BOOT_PATH", "CONNECTION_PATH", "SANDBOX_UID", "WORKDIR", "Jail", "check_jail", "interpreter_paths"]

SANDBOX_UID = 65534
WORKDIR = "/sandbox"  # cwd and HOME of the kernel, a private tmpfs
OPT_DIR = "/opt/tsbench"
BOOT_PATH = f"{OPT_DIR}/kernel_boot.py"
CONNECTION_PATH = f"{OPT_DIR}/kernel.json"
_HANDSHAKE_TIMEOUT_S = 30.0
_FIX = (
    "install bubblewrap (Debian package `bubblewrap`; `make setup` does), enable unprivileged user "
    "namespaces (sysctl kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0), "
    "or pass --unsafe-sandbox to run kernels without the jail"
)
_PASSWD = (
    f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
    f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:{WORKDIR}:/usr/sbin/nologin\n"
)
_GROUP = f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\n"
_HOSTS = "127.0.0.1 localhost sandbox\n::1 localhost\n"
_NSSWITCH = "passwd: files\ngroup: files\nhosts: files\n"


def interpreter_paths() -> list[str]:
    """The directories the interpreter needs, outermost only: its prefix and the virtualenv."""
    return _outermost(
        os.path.abspath(path) for path in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix)
    )


def _system_library_binds() -> tuple[list[str], list[tuple[str, str]]]:
    """(directories to bind, (target, link) symlinks): /usr/lib* and the /lib* links of merged-/usr."""
    binds, links = [], []
    for path in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32"):
        if os.path.isdir(path) and not os.path.islink(path):
            binds.append(path)
    for path in ("/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(path):
            links.append((os.readlink(path), path))
        elif os.path.isdir(path):
            binds.append(path)
    return binds, links


def _outermost(paths) -> list[str]:
    """Drop paths that lie inside another one of them."""
    kept: list[str] = []
    for path in sorted(set(paths), key=lambda p: (p.count("/"), p)):
        if not any(path == other or path.startswith(other.rstrip("/") + "/") for other in kept):
            kept.append(path)
    return kept


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


@dataclass
class Jail:
    """One episode's jail. The same spec serves the first launch and every restart; only the
    handshake pipes differ between launches."""

    command: list[str]  # what runs inside (paths as the jail sees them)
    ipc_dir: str  # host directory of the transport's sockets, bound read-write at the same path
    env: dict[str, str]
    work_bytes: int
    tmp_bytes: int
    readonly: dict[str, str] = field(default_factory=dict)  # jail path -> host path, bound read-only
    dirs: dict[str, int] = field(default_factory=dict)  # extra jail directories on a tmpfs -> mode
    network: bool = False
    host_uid: int | None = None  # root hosts: the throw-away host uid that 65534 maps to
    cgroup: EpisodeCgroup | None = None

    _fds: dict[str, int] = field(default_factory=dict, repr=False)  # jail path -> memfd with its content
    _modes: dict[str, int] = field(default_factory=dict, repr=False)
    _launch: dict[str, int] = field(default_factory=dict, repr=False)
    _child: int | None = field(default=None, repr=False)  # the jail's pid 1 (the inner bwrap), once known

    def __post_init__(self) -> None:
        for name, text in (("passwd", _PASSWD), ("group", _GROUP), ("hosts", _HOSTS), ("nsswitch.conf", _NSSWITCH)):
            self.put(f"/etc/{name}", text.encode())

    def put(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """A file the jail gets by value at every launch (a copy; the host keeps no path to it)."""
        old = self._fds.pop(path, None)
        if old is not None:
            os.close(old)
        self._fds[path] = _memfd(path, data)
        self._modes[path] = mode

    # ---- the command line

    def argv(self) -> list[str]:
        """bwrap's argv for the next launch (call `open_launch()` first); never touches disk."""
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxError(f"cannot start the jail: bubblewrap (bwrap) is not on PATH; {_FIX}")
        argv = [
            bwrap,
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "sandbox",
        ]
        if not self.network:
            argv.append("--unshare-net")
        argv += [
            "--die-with-parent",
            "--new-session",
            "--info-fd",
            str(self._launch["info_w"]),
            "--block-fd",
            str(self._launch["block_r"]),
            "--cap-drop",
            "ALL",
        ]
        if "seccomp" in self._launch:
            argv += ["--seccomp", str(self._launch["seccomp"])]
        if self.host_uid is not None:
            # bwrap runs as root: the host writes the uid map; the launcher drops to 65534 itself.
            argv += [
                "--userns-block-fd",
                str(self._launch["userns_r"]),
                "--cap-add",
                "CAP_SETUID",
                "--cap-add",
                "CAP_SETGID",
                "--cap-add",
                "CAP_SETPCAP",
            ]
        else:
            argv += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--disable-userns"]
        argv += self._filesystem_args()
        argv += ["--chdir", WORKDIR, "--clearenv"]
        for name, value in sorted(self.env.items()):
            argv += ["--setenv", name, value]
        return argv + ["--", *self.command]

    def _filesystem_args(self) -> list[str]:
        args: list[str] = []
        made: set[str] = {"/"}
        bound: list[str] = []  # read-only binds: what lies below them exists already
        writable = (WORKDIR, "/tmp")  # directories made below these stay writable for the kernel

        def inside(path: str, roots) -> bool:
            return any(path == root or path.startswith(root + "/") for root in roots)

        def parents(path: str) -> None:
            """Make the missing parents of `path` (bwrap would make them 0700, closed to uid 65534)."""
            for depth in range(1, path.count("/")):
                parent = "/".join(path.split("/")[: depth + 1])
                if parent in made or inside(parent, bound):
                    continue
                mode = "0777" if inside(parent, writable) and parent not in writable else "0755"
                if parent not in writable:
                    args.extend(["--perms", mode, "--dir", parent])
                made.add(parent)

        # The private mounts go first: a later bind shows through them, an earlier one would be hidden
        # (a virtualenv under /tmp, as in a checkout made with mktemp, must stay visible).
        args += [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--perms",
            "01777",
            "--size",
            str(self.tmp_bytes),
            "--tmpfs",
            "/dev/shm",
            "--perms",
            "01777",
            "--size",
            str(self.tmp_bytes),
            "--tmpfs",
            "/tmp",
        ]
        bound += ["/proc", "/dev"]
        made.add("/tmp")
        libraries, links = _system_library_binds()
        interpreter = interpreter_paths()
        for path in _outermost([*libraries, *interpreter]):
            parents(path)
            args.extend(["--ro-bind", path, path])
            bound.append(path)
        for target, link in links:
            args.extend(["--symlink", target, link])
            made.add(link)
        parents(WORKDIR)
        args += ["--perms", "0777", "--size", str(self.work_bytes), "--tmpfs", WORKDIR]
        made.add(WORKDIR)
        if os.path.isfile("/etc/ld.so.cache"):
            parents("/etc/ld.so.cache")
            args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        for path, mode in sorted(self.dirs.items()):
            parents(path)
            args += ["--perms", f"{mode:04o}", "--dir", path]
            made.add(path)
        for path, fd in sorted(self._fds.items()):
            parents(path)
            args += ["--perms", f"{self._modes[path]:04o}", "--file", str(fd), path]
        for path, source in sorted(self.readonly.items()):
            parents(path)
            args += ["--ro-bind", source, path]
            bound.append(path)
        parents(self.ipc_dir)
        args += ["--bind", self.ipc_dir, self.ipc_dir]
        return args + ["--remount-ro", "/dev", "--remount-ro", "/"]

    # ---- launching

    def open_launch(self) -> list[int]:
        """Fresh handshake pipes, file contents rewound; returns the fds bwrap must inherit."""
        for fd in self._fds.values():
            os.lseek(fd, 0, os.SEEK_SET)  # bwrap read them to the end at the previous launch
        self.close_launch()
        self._launch["info_r"], self._launch["info_w"] = os.pipe()
        self._launch["block_r"], self._launch["block_w"] = os.pipe()
        passed = [self._launch["info_w"], self._launch["block_r"]]
        if self.host_uid is not None:
            self._launch["userns_r"], self._launch["userns_w"] = os.pipe()
            passed.append(self._launch["userns_r"])
        from tsbench.harness.runtime import seccomp  # a jail that starts, not one an unsafe run never makes

        if (program := seccomp.program()) is not None:
            self._launch["seccomp"] = _memfd("seccomp", program)
            passed.append(self._launch["seccomp"])
        return passed + list(self._fds.values())

    def after_spawn(self, log_tail=lambda: "") -> None:
        """Finish a launch that bwrap has started: map the uids (root hosts), refuse nested user
        namespaces, move the jail into the episode cgroup, then let it run."""
        for end in ("info_w", "block_r", "userns_r"):
            if end in self._launch:
                os.close(self._launch.pop(end))
        child = self._read_child_pid(log_tail)
        # From here until the jail's pid 1 has set its own parent-death signal, a host that dies leaves it
        # blocked for ever (the outer bwrap dies with the host, before it lets pid 1 on): orphans.py.
        self._forget_child()
        self._child = child
        orphans.watch_pid(child)
        try:
            if self.host_uid is not None:
                mapping = f"0 0 1\n{SANDBOX_UID} {self.host_uid} 1\n"
                Path(f"/proc/{child}/uid_map").write_text(mapping)
                Path(f"/proc/{child}/gid_map").write_text(mapping)
                _refuse_nested_userns(child)
                os.write(self._launch["userns_w"], b"1")
            if self.cgroup is not None:
                self.cgroup.add(child)
            os.write(self._launch["block_w"], b"1")
        except OSError as exc:
            self.close_launch()
            raise SandboxError(f"cannot start the jail: setting it up failed ({exc}); {_FIX}") from exc
        for end in ("userns_w", "block_w"):
            if end in self._launch:
                os.close(self._launch.pop(end))
        # info_r stays open until the next launch or close(): bwrap may still be writing the rest of its
        # report, and a closed pipe would kill it with SIGPIPE.

    def _read_child_pid(self, log_tail) -> int:
        data = b""
        deadline = time.monotonic() + _HANDSHAKE_TIMEOUT_S
        reader = self._launch["info_r"]
        waiter = select.poll()  # poll, not select(): a busy host's descriptors run past FD_SETSIZE (1024)
        waiter.register(reader, select.POLLIN)
        while (match := re.search(rb'"child-pid"\s*:\s*(\d+)', data)) is None:
            remaining = deadline - time.monotonic()
            ready = waiter.poll(max(0.0, remaining) * 1000)
            chunk = os.read(reader, 4096) if ready else b""
            if not chunk:
                self.close_launch()
                raise SandboxError(f"cannot start the jail: {_bwrap_reason(log_tail())}; {_FIX}")
            data += chunk
        return int(match.group(1))

    def close_launch(self) -> None:
        for name in list(self._launch):
            try:
                os.close(self._launch.pop(name))
            except OSError:
                pass

    def _forget_child(self) -> None:
        if self._child is not None:
            orphans.forget_pid(self._child)
            self._child = None

    def close(self) -> None:
        """(After the jail is killed.) Release the launch pipes, the files' memfds and the watch."""
        self.close_launch()
        self._forget_child()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def _refuse_nested_userns(child: int) -> None:
    """Set user.max_user_namespaces = 0 inside the jail's user namespace (bwrap's own
    --disable-userns cannot be combined with the uid-map handshake). Needs nsenter (util-linux)."""
    nsenter, shell = shutil.which("nsenter"), shutil.which("sh")
    if nsenter is None or shell is None:
        return
    subprocess.run(
        [nsenter, f"--user=/proc/{child}/ns/user", "--", shell, "-c", "echo 0 > /proc/sys/user/max_user_namespaces"],
        check=True,
        capture_output=True,
        timeout=_HANDSHAKE_TIMEOUT_S,
    )


def _bwrap_reason(log: str) -> str:
    lines = [line.strip() for line in log.splitlines() if line.strip().startswith("bwrap:")]
    if lines:
        return lines[-1]
    return "bubblewrap exited before the jail was set up" + (f" ({log.strip()[-300:]})" if log.strip() else "")


@functools.lru_cache(maxsize=1)
def _preflight() -> str | None:
    """None when a jail starts here, else the one-line reason."""
    from tsbench.harness.runtime.limits import allocate_uid, release_uid

    jail = Jail(
        command=[sys.executable, "-I", "-c", "pass"],
        ipc_dir="",
        env={"PATH": "/usr/bin:/bin"},
        work_bytes=2**20,
        tmp_bytes=2**20,
        host_uid=allocate_uid() if os.geteuid() == 0 else None,
    )
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tsb-check-", dir=scratch) as ipc_dir:
        jail.ipc_dir = ipc_dir
        orphans.watch_dir(ipc_dir)  # bwrap starts there (cwd): a stuck one is found by it
        try:
            passed = jail.open_launch()
            argv = jail.argv()
            with tempfile.TemporaryFile() as log:
                # A session of its own, so that a failed launch is killed with the jail's pid 1 (still in
                # bwrap's process group before its handshake), not the outer bwrap alone.
                process = subprocess.Popen(
                    argv,
                    pass_fds=passed,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd=ipc_dir,
                    start_new_session=True,
                )

                def tail() -> str:
                    process.wait(timeout=10)
                    log.seek(0)
                    return log.read().decode(errors="replace")

                try:
                    jail.after_spawn(tail)
                    code = process.wait(timeout=60)
                except BaseException:
                    _kill_group(process)
                    raise
                if code != 0:
                    return f"cannot start the jail: {_bwrap_reason(tail())}; {_FIX}"
        except SandboxError as exc:
            return str(exc)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"cannot start the jail: {exc}; {_FIX}"
        finally:
            jail.close()
            orphans.forget_dir(ipc_dir)
            release_uid(jail.host_uid)  # the check's jail is gone with its pid namespace
    return None


def _kill_group(process: subprocess.Popen) -> None:
    """SIGKILL a launch's process group (bwrap and, before the handshake, the jail's pid 1) and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    process.wait()


def check_jail() -> None:
    """Raise SandboxError (one line: why, and how to fix it) unless kernels can be jailed here.
    Probed once per process (about 0.1 s)."""
    reason = _preflight()
    if reason is not None:
        raise SandboxError(reason)
