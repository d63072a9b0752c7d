"""Attack 1 of issue 12, the root escape: plant a kernelspec / connection file where the host would
read it at restart, kill the kernel, and wait for the host to run it. Judged from the host side."""

from __future__ import annotations

from pathlib import Path

import pytest

from jail_episode import TcpListener, attack_task
from tsbench.harness.runtime.sandbox import Sandbox

pytestmark = pytest.mark.timeout(180)

PLANT = """
import json, os, re, sys
marker, port = {marker!r}, {port}
escape = ("open(%r, 'w').write('escaped'); import socket; "
          "socket.create_connection(('127.0.0.1', %d), timeout=2)") % (marker, port)
spec = {{"argv": [sys.executable, "-c", escape], "display_name": "x", "language": "python"}}
roots = set()
for line in open('/proc/self/mountinfo'):
    roots.update(re.findall(r'(/\\S*?/tsb-[^/\\s]+)', line))
print('HOST ROOTS SEEN', len(roots))
targets = []
for root in sorted(roots) + ['/tmp']:
    try:  # the original attack: move the kernelspecs aside and put ours in their place
        os.rename(os.path.join(root, 'run', 'kernels'), os.path.join(root, 'run', 'moved'))
    except OSError:
        pass
    for sub in ('', 'run', 'ctl', 'ipc', 'input', 'work'):
        folder = os.path.join(root, sub)
        targets.append(os.path.join(folder, 'kernels', 'tsbench-sandbox', 'kernel.json'))
        targets += [os.path.join(folder, 'kernel%d.json' % n) for n in range(1, 4)]
targets += ['/opt/tsbench/kernel.json', '/opt/tsbench/kernel_boot.py']
planted, refused = [], []
for path in targets:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as handle:
            handle.write(json.dumps(spec) if path.endswith('.json') else escape)
        planted.append(path)
    except OSError as exc:
        refused.append(type(exc).__name__)
print('PLANTED', len(planted), 'REFUSED', sorted(set(refused)))
"""


def test_restart_never_runs_what_the_kernel_wrote(tmp_path):
    """The sandbox's restart (an episode ends on it as an error row, tests/test_kernel_lost.py; the
    sandbox itself still restarts, and nothing the old kernel wrote runs on the host)."""
    marker = tmp_path / "escaped.txt"
    listener = TcpListener()
    try:
        with Sandbox(attack_task().series, cell_timeout_s=60) as box:
            planted = box.run(PLANT.format(marker=str(marker), port=listener.port))
            died = box.run("import os\nos._exit(1)")  # the host restarts the kernel
            alive = box.run("print('ALIVE', L, channels)")
        assert "PLANTED" in planted.stdout and "HOST ROOTS SEEN" in planted.stdout
        assert died.restarted and "kernel died" in died.error
        assert "ALIVE 400 ['a']" in alive.stdout  # a fresh kernel
        assert not marker.exists()  # nothing the kernel wrote ran on the host
        assert not listener.connected()
    finally:
        listener.close()


def test_the_host_launch_command_lives_in_memory_only(tmp_path):
    """Nothing under the host's private directory describes how to launch a kernel, and the files the
    host keeps there (connection files, kernel log) are in a directory the jail does not contain."""
    from tsbench.harness.runtime.sandbox import Sandbox

    with Sandbox({}) as box:
        root = box._root
        ctl = root / "ctl"
        assert sorted(p.name for p in root.iterdir()) == ["ctl", "host.pid", "input", "ipc"]
        assert not list(root.rglob("kernel.json")) and not list(root.rglob("kernels"))
        assert ctl.stat().st_mode & 0o777 == 0o700
        seen = box.run(
            f"import os\n[os.path.exists(p) for p in ({str(ctl)!r}, {str(root / 'input')!r}, {str(root)!r})]"
        )
        assert seen.result_repr == "[False, False, True]"  # only the socket directory's parent exists in the jail
        listing = box.run(f"import os\nsorted(os.listdir({str(root)!r}))")
        assert listing.result_repr == "['ipc']"
        sockets = box.run(f"import os\nsorted(os.listdir({str(root / 'ipc')!r}))")
        written = box.run(f"open({str(root / 'ipc' / 'note')!r}, 'w').write('x')")
        if box.sandbox_uid is not None:  # root hosts: once its sockets are bound, not even there
            assert "PermissionError" in sockets.error and "PermissionError" in written.error
            assert not (root / "ipc" / "note").exists() and (root / "ipc").stat().st_uid == 0
        else:  # the kernel shares the host's uid: the socket directory stays writable (documented)
            assert written.error == ""
    assert not Path(root).exists()
