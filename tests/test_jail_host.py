"""Attacks 3-5 of issue 12 in real episodes, judged from the host side: ctypes writes to /tmp,
/dev/shm and /var/tmp; fork + exec of a shell, of the interpreter and of a daemon; TCP, UNIX and
abstract sockets towards host listeners; the disk quota; the whole-episode memory bound."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from jail_episode import TcpListener, host_processes_with, play_attack
from tsbench.harness.runtime.sandbox import Sandbox

pytestmark = pytest.mark.timeout(240)

CTYPES_WRITES = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for path in {paths!r}:
    fd = libc.open(path.encode(), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
    wrote = libc.write(fd, b'planted', 7) if fd >= 0 else -1
    print('WRITE', path, fd >= 0 and wrote == 7, os.strerror(ctypes.get_errno()) if fd < 0 else '')
    if fd >= 0:
        libc.close(fd)
"""


def test_ctypes_writes_stay_inside_the_episode(tmp_path):
    name = f"tsbench-planted-{uuid.uuid4().hex}"
    host_target = tmp_path / name
    paths = [f"/tmp/{name}", f"/dev/shm/{name}", f"/var/tmp/{name}", str(host_target)]
    _, first = play_attack([CTYPES_WRITES.format(paths=paths)])
    assert f"WRITE /tmp/{name} True" in first[0] and f"WRITE /dev/shm/{name} True" in first[0]
    assert f"WRITE /var/tmp/{name} False" in first[0] and f"WRITE {host_target} False" in first[0]
    for path in paths:
        assert not Path(path).exists(), path  # nothing reached the host
    _, second = play_attack([f"import os\nprint('LEFT', [p for p in {paths!r} if os.path.exists(p)])"])
    assert "LEFT []" in second[0]  # nor the next episode


FORKS = """
import os, sys, time
marker, token = {marker!r}, {token!r}
pid = os.fork()
if pid == 0:
    try:
        os.execv('/bin/sh', ['sh', '-c', 'echo escaped > ' + marker])
    finally:
        os._exit(127)
print('SH', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
pid = os.fork()
if pid == 0:
    try:
        os.execv(sys.executable, [sys.executable, '-c',
                 'import socket; open(%r, "w").write("x")' % marker])
    finally:
        os._exit(127)
print('PY', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
pid = os.fork()
if pid == 0:  # a daemon that means to outlive the episode
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(900)', token])
    os._exit(0)
os.waitpid(pid, 0)
time.sleep(1.0)
print('DAEMON', token)
"""


def test_fork_and_exec_are_contained(tmp_path):
    marker = tmp_path / "escaped.txt"
    token = f"tsbench-daemon-{uuid.uuid4().hex}"
    seen_during: list[list[int]] = []

    def probe_then_answer() -> str:  # the model's next turn, taken while the episode is still running
        seen_during.append(host_processes_with(token))
        return "print('ALIVE')"

    from jail_episode import FINAL, ScriptedChat, attack_task, fenced
    from tsbench.harness import HarnessSettings, play

    model = ScriptedChat(
        [fenced(FORKS.format(marker=str(marker), token=token)), lambda: fenced(probe_then_answer()), FINAL]
    )
    outcome = play(model, "rlm", attack_task(), HarnessSettings(max_turns=4, cell_timeout_s=60))
    assert outcome.error is None and outcome.result.final_message == FINAL
    observations = [e["observation"] for e in outcome.result.transcript if e["role"] == "tool"]
    assert "SH 127" in observations[0]  # no shell in the jail
    assert "PY 1" in observations[0]  # the interpreter runs, and cannot reach the host path
    assert f"DAEMON {token}" in observations[0] and "ALIVE" in observations[1]
    assert seen_during and seen_during[0], "the daemon should have been running during the episode"
    assert host_processes_with(token) == []  # and it died with the episode's jail
    assert not marker.exists()


SOCKETS = """
import socket
results = {{}}
def attempt(name, family, address):
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(2)
    try:
        sock.connect(address)
        results[name] = 'CONNECTED'
    except OSError as exc:
        results[name] = type(exc).__name__
    finally:
        sock.close()
attempt('tcp', socket.AF_INET, ('127.0.0.1', {port}))
attempt('unix', socket.AF_UNIX, {unix_path!r})
attempt('abstract', socket.AF_UNIX, {abstract!r})
print('SOCKETS', sorted(results.items()))
"""


def test_host_sockets_are_unreachable():
    tcp = TcpListener()
    unix_path = f"/tmp/tsbench-host-{uuid.uuid4().hex[:12]}.sock"
    abstract = f"\0tsbench-host-{uuid.uuid4().hex[:12]}"
    listeners = []
    try:
        for address in (unix_path, abstract):
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(address)
            listener.listen(4)
            listener.settimeout(0.3)
            listeners.append(listener)
        _, observations = play_attack([SOCKETS.format(port=tcp.port, unix_path=unix_path, abstract=abstract)])
        assert "SOCKETS" in observations[0] and "CONNECTED" not in observations[0], observations[0]
        assert not tcp.connected()
        for listener in listeners:
            with pytest.raises(socket.timeout):
                listener.accept()
    finally:
        tcp.close()
        for listener in listeners:
            listener.close()
        if os.path.exists(unix_path):
            os.unlink(unix_path)


FILL = """
import errno, os
def fill(folder, chunk=64 * 2**20, limit=3 * 2**30):
    written, n = 0, 0
    try:
        while written < limit:
            with open(os.path.join(folder, 'fill%d' % n), 'wb') as handle:
                for _ in range(4):
                    handle.write(b'x' * chunk)
                    written += chunk
            n += 1
    except OSError as exc:
        return written, errno.errorcode[exc.errno]
    return written, 'no limit'
for folder in ('/sandbox', '/tmp', '/dev/shm'):
    written, why = fill(folder)
    print('FILL', folder, written // 2**20, why)
    for name in os.listdir(folder):
        if name.startswith('fill'):
            os.remove(os.path.join(folder, name))
"""


def test_disk_quota_is_enforced_and_the_episode_continues():
    _, observations = play_attack([FILL, "print('ALIVE', len(series))"])
    lines = [line.split() for line in observations[0].splitlines() if line.startswith("FILL")]
    quotas = {"/sandbox": 1024, "/tmp": 256, "/dev/shm": 256}  # MiB, Sandbox's defaults
    assert [line[1] for line in lines] == list(quotas)
    for _, folder, megabytes, why in lines:
        assert why == "ENOSPC" and int(megabytes) <= quotas[folder], (folder, megabytes, why)
    assert "ALIVE 1" in observations[1]


def test_file_size_limit_and_small_quotas():
    with Sandbox({}, file_bytes=8 * 2**20, work_bytes=32 * 2**20, tmp_bytes=16 * 2**20) as box:
        big = box.run("open('big', 'wb').write(b'x' * (9 * 2**20))")
        assert "File too large" in big.error
        filled = box.run(FILL.replace("chunk=64 * 2**20", "chunk=2**20"))
        assert "FILL /sandbox 3" in filled.stdout or "FILL /sandbox 2" in filled.stdout, filled.stdout
        assert "FILL /tmp 1" in filled.stdout and "ENOSPC" in filled.stdout
        assert box.run("1 + 1").result_repr == "2"


MEMFD_FLOOD = """
import os
held, total = [], 0
while total < 2 * 2**30:  # memory outside any address space: RLIMIT_AS does not see it
    fd = os.memfd_create('flood')
    os.write(fd, b'x' * (16 * 2**20))
    held.append(fd)
    total += 16 * 2**20
print('HELD', total // 2**20)
"""


def test_whole_episode_memory_bound():
    # RLIMIT_AS must leave room for the interpreter's address space (a booted kernel maps ~400 MB)
    with Sandbox({}, memory_bytes=768 * 2**20, work_bytes=32 * 2**20, tmp_bytes=16 * 2**20, cell_timeout_s=60) as box:
        if box.cgroup is None:
            pytest.skip(f"no writable cgroup here: the bound is {box.limits_description}")
        directories = list(box.cgroup.directories)
        flood = box.run(MEMFD_FLOOD)
        assert "HELD 2048" not in flood.stdout
        assert flood.restarted and "kernel died" in flood.error
        assert box.run("len(series)").result_repr == "0"  # the episode goes on
    assert not any(directory.exists() for directory in directories)


SYSCALLS = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
status = [l.split(':')[1].strip() for l in open('/proc/self/status') if l.startswith('Seccomp:')]
print('SECCOMP', status)
for name, nr, args in [('ptrace_traceme', 101, (0, 0, 0, 0)), ('unshare_user', 272, (0x10000000,)),
                       ('bpf', 321, (0, 0, 0)), ('keyctl', 250, (0, 0)), ('perf_event_open', 298, (0, 0, -1, -1, 0)),
                       ('userfaultfd', 323, (0,)), ('io_uring_setup', 425, (1, 0))]:
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    print('CALL', name, rc, errno_name := os.strerror(ctypes.get_errno()) if rc < 0 else 'ok')
print('GETPID', libc.syscall(ctypes.c_long(39)) > 0)
"""


def test_the_seccomp_filter_refuses_dangerous_system_calls():
    """PTRACE_TRACEME succeeds for any unprivileged process and perf/bpf/io_uring calls fail with other
    errors than EPERM when merely misused: EPERM on every one of them is the filter's doing."""
    from tsbench.harness.runtime.seccomp import program

    if program() is None:
        pytest.skip("no seccomp table for this architecture")
    outcome, observations = play_attack([SYSCALLS])
    seen = observations[0]
    assert "SECCOMP ['2']" in seen  # filter mode, inherited by everything the kernel starts
    for name in ("ptrace_traceme", "unshare_user", "bpf", "keyctl", "perf_event_open", "userfaultfd", "io_uring_setup"):
        assert f"CALL {name} -1 {os.strerror(1)}" in seen, (name, seen)
    assert "GETPID True" in seen  # ordinary calls still work, and the episode finished
