"""The sandbox against a real kernel: data loading, observations, limits and the unsafe mode's walls.

The jail's own walls, attacked from real episodes, are in tests/test_jail_*.py."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest

from tsbench.harness.runtime.bare import bare_roundtrip_seconds
from tsbench.harness.runtime.jail import interpreter_paths
from tsbench.harness.runtime.observation import CellOutput, dropped_characters
from tsbench.harness.runtime.sandbox import OBSERVATION_MAX_CHARS, CellResult, Sandbox, truncate_observation

pytestmark = pytest.mark.timeout(120)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SERIES = {
    "temperature": np.linspace(0.0, 1.0, 500),
    "pressure": np.arange(500, dtype=np.float64),
    "flow": np.sin(np.arange(500) / 10.0),
}


@pytest.fixture(scope="module")
def sandbox():
    """One sandbox for the tests that do not break anything."""
    with Sandbox(SERIES, cell_timeout_s=30) as shared:
        yield shared


def _truncated_count(text: str) -> int:
    match = re.search(r"\[\.\.\. truncated (\d+) characters \.\.\.\]", text)
    assert match, text[-200:]
    return int(match.group(1))


# ------------------------------------------------------------------ pure pieces --


def test_truncate_observation_keeps_short_text():
    assert truncate_observation("short", 100) == "short"


def test_truncate_observation_says_how_much_was_cut():
    text = "".join(f"{i:06d}" for i in range(5000))  # 30,000 distinct characters
    truncated = truncate_observation(text, OBSERVATION_MAX_CHARS)
    assert len(truncated) <= OBSERVATION_MAX_CHARS
    cut = _truncated_count(truncated)
    head, tail = re.split(r"\n\[\.\.\. truncated \d+ characters \.\.\.\]\n", truncated)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + cut + len(tail) == len(text)


def test_flooding_output_keeps_head_and_tail_and_counts_the_rest():
    output = CellOutput(max_figures=2, keep_chars=100)
    for index in range(1000):
        output.add({"msg_type": "stream", "content": {"name": "stdout", "text": f"{index:04d}\n"}})
    stdout = output.result().stdout
    assert stdout.startswith("0000\n0001\n") and stdout.endswith("0998\n0999\n")
    head, dropped, tail = re.split(r"\n\[\.\.\. truncated (\d+) characters \.\.\.\]\n", stdout)
    assert len(head) == 100 and 100 <= len(tail) <= 200
    assert len(head) + int(dropped) + len(tail) == 5000


def test_nested_truncation_counts_every_dropped_character():
    """The buffer's cut, the cell's cut and the turn's cut leave one marker with the real total."""
    output = CellOutput(max_figures=2, keep_chars=1000)
    text = "".join(f"<{i:07d}>" for i in range(50_000))  # 450,000 distinct characters
    for start in range(0, len(text), 4096):
        output.add({"msg_type": "stream", "content": {"name": "stdout", "text": text[start : start + 4096]}})
    cell = output.result().observation(max_chars=1500)
    turn = truncate_observation("Output:\n" + cell, 300)
    assert len(turn) <= 300 and turn.count("truncated") == 1
    head, tail = re.split(r"\n\[\.\.\. truncated \d+ characters \.\.\.\]\n", turn)
    assert head.startswith("Output:\n<0000000>") and text.endswith(tail)
    assert len(head) - len("Output:\n") + dropped_characters(turn) + len(tail) == len(text)


def test_truncation_never_splits_an_earlier_marker():
    inner = truncate_observation("x" * 5000, 200)
    for cut in range(60, 260, 7):
        outer = truncate_observation("y" * 100 + inner + "z" * 100, cut)
        assert len(outer) <= cut and outer.count("truncated") == 1
        assert outer.count("x") + outer.count("y") + outer.count("z") + dropped_characters(outer) == 5200


def test_observation_joins_stdout_result_and_error():
    result = CellResult(stdout="hello\n", result_repr="42", error="Traceback: boom")
    assert result.observation() == "hello\n42\nTraceback: boom"


# --------------------------------------------------------------- data and state --


def test_series_and_context_are_loaded(sandbox):
    result = sandbox.run(
        "print(type(series).__name__, L, channels)\n"
        "print({k: (v.dtype.name, v.shape) for k, v in series.items()})\n"
        "print(np.__name__, scipy.__name__)\n"
        "float(series['pressure'][499])"
    )
    assert result.error == ""
    assert "dict 500 ['temperature', 'pressure', 'flow']" in result.stdout
    assert "'flow': ('float64', (500,))" in result.stdout
    assert "numpy scipy" in result.stdout
    assert result.result_repr == "499.0"
    context = sandbox.run("import json; context = json.load(open('context.json')); list(context)")
    assert context.result_repr == repr(list(SERIES))
    flow = sandbox.run("np.allclose(context['flow'], series['flow']), len(context['flow'])")
    assert flow.result_repr == "(True, 500)"
    assert str(sandbox.workdir) == "/sandbox" and sandbox.run("import os; os.getcwd()").result_repr == "'/sandbox'"


def test_files_enter_by_value_and_series_may_be_empty(tmp_path):
    files = {"data/table.csv": b"a,b\n1,2\n", "notes.json": b'{"k": 3}'}
    with Sandbox({}, files=files) as box:
        result = box.run(
            "import json\n"
            "print(open('data/table.csv').read().split())\n"
            "print(json.load(open('notes.json')))\n"
            "open('data/table.csv', 'a').write('3,4\\n')\n"
            "print(len(open('data/table.csv').read().split()), L, channels, series)"
        )
        assert result.error == "", result.error
        assert "['a,b', '1,2']" in result.stdout and "{'k': 3}" in result.stdout
        assert "3 0 [] {}" in result.stdout
    with pytest.raises(ValueError, match="relative paths"):
        Sandbox({}, files={"../escape.txt": b"x"})


def test_readonly_paths_are_copies_mounted_read_only(tmp_path):
    cache = tmp_path / "cache"
    (cache / "sub").mkdir(parents=True)
    (cache / "sub" / "blob.bin").write_bytes(b"compiled")
    cache.chmod(0o700)
    with Sandbox({}, readonly_paths=[cache]) as box:
        read = box.run(f"open({str(cache / 'sub' / 'blob.bin')!r}, 'rb').read()")
        assert read.result_repr == "b'compiled'"
        write = box.run(f"open({str(cache / 'sub' / 'new.bin')!r}, 'wb')")
        assert "Read-only file system" in write.error
        sibling = box.run(f"import os; os.listdir({str(tmp_path)!r})")
        assert sibling.result_repr == "['cache']"  # only the copied path, not its neighbours


def test_state_persists_and_observation_has_all_parts(sandbox):
    assert sandbox.run("x = 41").observation() == ""
    result = sandbox.run("print('the answer is near')\nx + 1")
    assert result.stdout == "the answer is near\n"
    assert result.result_repr == "42"
    assert result.observation() == "the answer is near\n42"
    failed = sandbox.run("print('before')\n1 / 0")
    assert "ZeroDivisionError" in failed.error
    assert "\x1b[" not in failed.error
    assert failed.observation().startswith("before\n")
    assert sandbox.run("x").result_repr == "41"


def test_long_output_is_truncated_with_count(sandbox):
    result = sandbox.run("print('y' * 20000)")
    observation = result.observation()
    assert len(observation) <= OBSERVATION_MAX_CHARS
    assert _truncated_count(observation) == 20000 - observation.count("y")


def test_plain_input_is_refused_without_stdin(sandbox):
    assert "StdinNotImplementedError" in sandbox.run("input('name? ')").error


def test_timing_is_recorded(sandbox):
    assert 0 < sandbox.start_seconds < 30
    assert sandbox.run("1 + 1").seconds < 5
    assert 0 < bare_roundtrip_seconds(repeats=3) < 5


def test_kernel_runs_unprivileged_in_its_own_namespaces(sandbox):
    result = sandbox.run(
        "import os, socket\n"
        "status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())\n"
        "print(os.getuid(), os.getgid(), os.getgroups(), socket.gethostname())\n"
        "print(*(status[k].strip() for k in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs')))\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "print(sorted(os.listdir('/')))"
    )
    assert result.error == "", result.error
    ids, caps, pids, top = result.stdout.splitlines()
    assert ids == "65534 65534 [] sandbox"
    assert caps == "0000000000000000 " * 5 + "1"
    assert len(eval(pids)) <= 3  # bwrap's init, the kernel (and a reaped helper at most)
    # the system directories, plus the first component of what is bound at its host path: the
    # interpreter (a checkout may live anywhere, e.g. /check/...) and the transport's socket directory
    bound_at_host_path = [*interpreter_paths(), str(sandbox._ipc_dir)]
    allowed = {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "opt", "proc", "sandbox", "tmp", "usr"}
    allowed |= {Path(path).parts[1] for path in bound_at_host_path}
    assert set(eval(top)) <= allowed
    if os.geteuid() == 0:  # root hosts: uid 65534 in the jail is a throw-away host uid, not root
        assert sandbox.sandbox_uid is not None and sandbox.sandbox_uid >= 2**30


def test_kernel_starts_without_the_debugger(sandbox):
    """debugpy is never imported (a quarter of a kernel's start CPU); the kernel works without it."""
    result = sandbox.run(
        "import sys\nprint(sys.modules.get('debugpy', 'absent'))\n"
        "try:\n    import debugpy\nexcept ImportError:\n    print('refused')\n"
        "print(any(name.startswith(('_pydevd', 'pydevd')) for name in sys.modules))"
    )
    assert result.error == "", result.error
    assert result.stdout.split() == ["None", "refused", "False"]


# ----------------------------------------------------------- timeouts and crashes --


def test_busy_loop_is_interrupted_and_state_kept():
    with Sandbox(SERIES, cell_timeout_s=2) as box:
        box.run("kept = 'still here'")
        result = box.run("while True:\n    pass")
        assert result.timed_out and not result.restarted
        assert "timed out after 2 s" in result.observation()
        after = box.run("kept, len(series['flow'])")
        assert after.result_repr == "('still here', 500)"


def test_endless_printing_times_out_with_bounded_output():
    with Sandbox(SERIES, cell_timeout_s=2) as box:
        result = box.run("while True:\n    print('z' * 1000)")
        assert result.timed_out
        assert len(result.stdout) < 600_000
        # cut either way: the observation's own truncation, or the host refusing a flush over its message bound
        assert dropped_characters(result.stdout) > 0 or "refused by the host" in result.stdout
        assert len(result.observation()) <= OBSERVATION_MAX_CHARS
        assert box.run("len(channels)").result_repr == "3"


def test_cell_ignoring_interrupt_restarts_kernel_with_series():
    with Sandbox(SERIES, cell_timeout_s=2, interrupt_grace_s=1) as box:
        box.run("lost = 1")
        result = box.run("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)")
        assert result.timed_out and result.restarted
        assert "kernel restarted, series reloaded" in result.error
        assert box.restarts == 1
        assert box.run("L, channels").result_repr == "(500, ['temperature', 'pressure', 'flow'])"
        assert "NameError" in box.run("lost").error


def test_memory_bomb_is_contained():
    with Sandbox(SERIES, memory_bytes=2**30) as box:
        result = box.run("big = np.ones(2**30)")  # 8 GiB against a 1 GiB cap
        assert "MemoryError" in result.error or result.restarted
        assert box.run("float(series['pressure'].sum())").result_repr == "124750.0"


def test_normal_work_on_a_long_series_fits_the_default_memory_cap():
    long_series = {f"ch{i:02d}": np.random.default_rng(i).normal(size=131072) for i in range(16)}
    with Sandbox(long_series, capture_figures=True) as box:
        result = box.run(
            "import scipy.signal, matplotlib.pyplot as plt\n"
            "matrix = np.stack([series[name] for name in channels])\n"
            "spectra = np.abs(np.fft.rfft(matrix, axis=1))\n"
            "windows = np.lib.stride_tricks.sliding_window_view(matrix, 256, axis=1)[:, ::64]\n"
            "zscores = (windows - windows.mean(-1, keepdims=True)) / windows.std(-1, keepdims=True)\n"
            "peaks = [scipy.signal.find_peaks(row, height=4)[0].size for row in matrix]\n"
            "corr = np.corrcoef(matrix)\n"
            "fig, axes = plt.subplots(4, 1, figsize=(12, 8))\n"
            "for ax, name in zip(axes, channels): ax.plot(series[name], lw=0.3)\n"
            "print(L, len(channels), spectra.shape, zscores.shape, corr.shape)"
        )
        assert result.error == "", result.error
        assert "131072 16 (16, 65537)" in result.stdout
        assert len(result.images) == 1 and result.images[0].startswith(PNG_MAGIC)


def test_dead_kernel_is_restarted():
    with Sandbox(SERIES) as box:
        result = box.run("import os\nos._exit(3)")
        assert result.restarted and "kernel died" in result.error
        assert box.run("len(channels)").result_repr == "3"


# --------------------------------------------------------------------- the walls --


def test_kernel_cannot_reach_a_host_listener():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        with Sandbox(SERIES) as box:
            result = box.run(
                f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('connected')"
            )
            assert "connected" not in result.stdout
            assert result.error, result
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()


def test_in_kernel_guard_refuses_sockets_where_no_namespace_is_used():
    """Forces the unsafe mode's fallback for machines without namespaces, so it is tested here too.
    Only the guard stands between the kernel and the listener in this mode."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        box = Sandbox(SERIES, unsafe=True)
        box.network_mode = "guard"
        with box:
            result = box.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)")
            assert "outbound network access is disabled" in result.error
            unix = box.run("import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect_ex('nowhere')")
            assert "PermissionError" not in unix.error
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()


def test_fork_loop_is_bounded_and_host_survives():
    with Sandbox(SERIES, cell_timeout_s=20, max_tasks=64) as box:
        assert box.task_limit == 64 or box.cgroup is not None, box.limits_description
        result = box.run(
            "import os, time\n"
            "children = 0\n"
            "try:\n"
            "    while children < 100000:\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(120)\n"
            "            os._exit(0)\n"
            "        children += 1\n"
            "except OSError as exc:\n"
            "    print('refused after', children, type(exc).__name__)"
        )
        assert "refused after" in result.stdout, result
        assert int(result.stdout.split()[2]) < 64
        assert subprocess.run(["true"]).returncode == 0  # the host can still start processes
        assert box.run("len(series)").result_repr == "3"
        uid = box.sandbox_uid
    if uid is not None:
        owners = []
        for entry in Path("/proc").iterdir():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            if f"Uid:\t{uid}\t" in status and "(zombie)" not in status:
                owners.append(entry.name)
        assert owners == []


def test_jailed_writes_never_reach_the_host(tmp_path):
    target = tmp_path / "escape.txt"
    in_tmp = Path("/tmp") / f"tsbench-escape-{uuid.uuid4().hex}"
    with Sandbox(SERIES) as box:
        assert box.run("open('notes.txt', 'w').write('ok')").error == ""
        assert "FileNotFoundError" in box.run(f"open({str(target)!r}, 'w').write('escaped')").error
        assert box.run(f"open({str(in_tmp)!r}, 'w').write('private')").error == ""  # the jail's own /tmp
        assert "Read-only file system" in box.run("open('/etc/hostname', 'w')").error
    assert not target.exists() and not in_tmp.exists()


def test_unsafe_mode_refuses_writes_outside_the_working_directory(tmp_path):
    target = tmp_path / "escape.txt"
    in_tmp = Path("/tmp") / f"tsbench-escape-{uuid.uuid4().hex}"
    try:
        with Sandbox(SERIES, unsafe=True) as box:
            inside = box.run("open('notes.txt', 'w').write('ok')")
            assert inside.error == "" and (box.workdir / "notes.txt").read_text() == "ok"
            for path in (target, in_tmp):
                result = box.run(f"open({str(path)!r}, 'w').write('escaped')")
                assert "PermissionError" in result.error
                assert not path.exists()
            assert "PermissionError" in box.run("import os; os.remove('/etc/hostname')").error
            shell = box.run(f"import subprocess; subprocess.run(['sh', '-c', 'echo x > {in_tmp}'])")
            assert "PermissionError" in shell.error and not in_tmp.exists()
            if box.sandbox_uid is not None:  # below the hooks, the OS refuses too
                raw = box.run(
                    "import ctypes, os\n"
                    f"ctypes.CDLL(None).open({str(target).encode()!r}, os.O_WRONLY | os.O_CREAT, 0o644)"
                )
                assert raw.result_repr == "-1" and not target.exists()
    finally:
        if in_tmp.exists():
            in_tmp.unlink()


@pytest.mark.parametrize("unsafe", [False, True])
def test_private_directory_is_removed_after_close(unsafe):
    box = Sandbox(SERIES, unsafe=unsafe).start()
    root = box._root
    assert box.run("1").error == ""
    assert (root / "ipc").is_dir() and not list(root.rglob("kernel.json"))  # no kernelspec on disk
    box.close()
    assert not root.exists()


def test_unsafe_mode_still_runs_the_episode():
    with Sandbox(SERIES, unsafe=True) as box:
        assert box.network_mode in ("netns", "userns", "guard")
        result = box.run("import os\nos._exit(3)")
        assert result.restarted and box.run("len(channels)").result_repr == "3"


# --------------------------------------------------------------- figures, sub_rlm --


def test_figures_are_captured_as_png_at_most_two():
    with Sandbox(SERIES, capture_figures=True) as box:
        result = box.run(
            "import matplotlib.pyplot as plt\n"
            "for name in channels:\n"
            "    plt.figure()\n"
            "    plt.plot(series[name])\n"
            "plt.show()"
        )
        assert result.error == ""
        assert len(result.images) == 2
        assert all(image.startswith(PNG_MAGIC) for image in result.images)
        assert "1 more figure" in result.stdout
        assert box.run("len(plt.get_fignums())").result_repr == "0"


def test_figures_are_not_captured_by_default(sandbox):
    result = sandbox.run("import matplotlib.pyplot as plt\nplt.plot([1, 2]);")
    assert result.images == []


def test_sub_rlm_round_trip():
    calls = []

    def echo(question: str, data: dict | None) -> str:
        calls.append((question, data))
        return f"echo: {question}"

    with Sandbox(SERIES, sub_rlm_handler=echo) as box:
        result = box.run("sub_rlm('where is the spike?', {'x': series['flow'][:4], 'k': 2})")
        assert result.error == ""
        assert result.result_repr == "'echo: where is the spike?'"
        assert box.run("sub_rlm('again')").result_repr == "'echo: again'"
    (question, data), (_, no_data) = calls
    assert question == "where is the spike?"
    assert np.allclose(data["x"], SERIES["flow"][:4]) and data["k"] == 2
    assert no_data is None
    assert box.sub_rlm_calls == 2


def test_sub_rlm_absent_without_handler(sandbox):
    assert "NameError" in sandbox.run("sub_rlm('hello')").error


def test_sub_rlm_handler_failure_reaches_the_model():
    def broken(question: str, data: dict | None) -> str:
        raise ValueError("nested episode failed")

    with Sandbox(SERIES, sub_rlm_handler=broken) as box:
        error = box.run("sub_rlm('q')").error
        assert "RuntimeError" in error and "nested episode failed" in error
