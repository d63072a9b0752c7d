"""The sandbox: a fresh ipykernel per episode, where model-written code runs.

Model code never runs in the host process. Each `Sandbox` starts its own kernel in a
private temporary directory and talks to it over jupyter_client's `ipc` transport (unix
sockets in that directory), because TCP loopback does not cross a network namespace.

The walls, from strongest to weakest (spec/harness.md, "Limits"):

* Network: the kernel's command starts with `unshare -n` (root) or `unshare -rn` (a user
  namespace), so it has no network interfaces at all (`network_mode` "netns"/"userns").
  Where neither works, an audit hook in the kernel refuses non-unix socket connections
  ("guard"), and a warning says so at start-up. `network=True` leaves the network on
  ("host").
* User (root hosts): the kernel runs as a throw-away uid of its own, keeping only
  CAP_DAC_READ_SEARCH so it can read the interpreter and libraries wherever they live.
  The OS then refuses writes to anything that uid does not own, and RLIMIT_NPROC (which
  root ignores) bounds its tasks, so a fork loop stops at `max_tasks`. On close or
  restart every process of that uid is killed, even ones that left the process group.
  Without root, RLIMIT_NPROC is set to the user's current task count plus `max_tasks`.
* Limits: RLIMIT_AS (`memory_bytes`), RLIMIT_FSIZE (`file_bytes`), no core dumps; numpy
  and BLAS are pinned to one thread so their reserved address space stays small.
* Files: the working directory is the kernel's cwd, HOME and TMPDIR; audit hooks in the
  kernel refuse writes, deletions and renames outside it (this also covers world-writable
  places such as /tmp, which the uid alone does not) and refuse starting other programs,
  which would escape the hooks. Forking is allowed, bounded as above. The hooks stop
  ordinary Python, not ctypes. The directory is removed on close.
* Environment: the kernel gets a short allow-listed environment, so host secrets such as
  API keys in environment variables do not reach model code.

A cell that runs past `cell_timeout_s` is interrupted; if it does not stop within
`interrupt_grace_s` the kernel is restarted with the series reloaded, and the episode
goes on. A kernel that dies (a crash, `os._exit`) is restarted the same way.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

from tsbench.harness.runtime.kernel_boot import SERIES_FILE, SUB_RLM_PROMPT_PREFIX

__all__ = [
    "OBSERVATION_MAX_CHARS",
    "CellResult",
    "Sandbox",
    "SandboxError",
    "bare_roundtrip_seconds",
    "detect_network_isolation",
    "truncate_observation",
]

log = logging.getLogger(__name__)

OBSERVATION_MAX_CHARS = 8192
CONTEXT_FILE = "context.json"
SubRlmHandler = Callable[[str, "dict[str, Any] | None"], str]

_BOOT_FILE = Path(__file__).with_name("kernel_boot.py")
_KERNEL_NAME = "tsbench-sandbox"
_HOST_PID_FILE = "host.pid"
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_POLL_S = 0.05
_KEEP_CHARS = 256 * 1024  # per stream, far above what an observation shows
_KERNEL_READY_TIMEOUT_S = 60.0
# Passed through to the kernel; everything else in the host environment stays behind.
_INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "PYTHONPATH")
# Per-process counter for throw-away uids: 2**30 + (pid << 8) + n stays below 2**31.
_FIRST_SANDBOX_UID = 2**30
_uid_counter = itertools.count()
_uid_lock = threading.Lock()


class SandboxError(RuntimeError):
    """The sandbox could not be started or booted (not an error in model code)."""


# ------------------------------------------------------------------- observations --

def truncate_observation(text: str, max_chars: int = OBSERVATION_MAX_CHARS) -> str:
    """Cut `text` to at most `max_chars`, saying how many characters were cut.

    Keeps the head and the tail (a quarter of the room): a traceback at the end of a long
    output is usually what the model most needs to see.
    """
    if len(text) <= max_chars:
        return text
    marker = "\n[... truncated {} characters ...]\n"
    room = max_chars - len(marker.format(len(text)))
    if room <= 0:
        return text[:max_chars]
    tail = room // 4
    head = room - tail
    cut = len(text) - head - tail
    return text[:head] + marker.format(cut) + text[len(text) - tail:]


@dataclass
class CellResult:
    """What one code cell produced, as the harness shows it to the model."""

    stdout: str = ""  # stdout and stderr, interleaved as they arrived
    result_repr: str = ""  # text/plain of the last expression's value
    error: str = ""  # traceback without colour codes, or a short reason from the sandbox
    images: list[bytes] = field(default_factory=list)  # PNG bytes, at most max_figures
    timed_out: bool = False
    restarted: bool = False
    seconds: float = 0.0

    def observation(self, max_chars: int = OBSERVATION_MAX_CHARS) -> str:
        """stdout, the result and the error, joined and truncated for the model."""
        parts = [self.stdout.rstrip("\n"), self.result_repr, self.error.rstrip("\n")]
        return truncate_observation("\n".join(part for part in parts if part), max_chars)


# ----------------------------------------------------------- probing the machine --

@functools.lru_cache(maxsize=1)
def detect_network_isolation() -> str:
    """How this machine can cut a kernel off the network: "netns", "userns" or "guard".

    Probed once per process by running `true` under each candidate.
    """
    if shutil.which("unshare"):
        if os.geteuid() == 0 and _command_works(["unshare", "-n", "true"]):
            return "netns"
        if _command_works(["unshare", "-rn", "true"]):
            return "userns"
    return "guard"


@functools.lru_cache(maxsize=1)
def _can_drop_to_own_uid() -> bool:
    """Whether kernels can run as a throw-away uid (root, and setpriv with ambient caps)."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return False
    return _command_works(_setpriv_prefix(_allocate_uid()) + ["true"])


def _command_works(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _allocate_uid() -> int:
    with _uid_lock:
        serial = next(_uid_counter) % 256
    return _FIRST_SANDBOX_UID + ((os.getpid() & 0x3FFFFF) << 8) + serial


def _setpriv_prefix(uid: int) -> list[str]:
    return [
        "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
        "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search", "--",
    ]


def _tasks_of_uid(uid: int) -> list[tuple[int, int]]:
    """(pid, thread count) of every live (non-zombie) process whose real uid is `uid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1 ").split()[0]) != uid or fields.get("State", "").strip().startswith("Z"):
            continue
        found.append((int(entry), int(fields.get("Threads", "1"))))
    return found


def _kill_all_of_uid(uid: int, attempts: int = 200) -> None:
    """SIGKILL every process of `uid` until none is left (forks may race the first pass)."""
    for _ in range(attempts):
        pids = [pid for pid, _threads in _tasks_of_uid(uid)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    log.warning("processes of sandbox uid %d survived %d kill rounds", uid, attempts)


@functools.lru_cache(maxsize=1)
def _matplotlib_font_lists() -> tuple[Path, ...]:
    """The host's matplotlib font list files, copied into every sandbox: without them the
    first `import matplotlib.pyplot` in a kernel rebuilds the list (seconds per episode).
    Built once here if the host has none yet."""
    try:
        import matplotlib
    except ImportError:
        return ()
    cache_dir = Path(matplotlib.get_cachedir())
    if not list(cache_dir.glob("fontlist-v*.json")):
        subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"],
                       capture_output=True, timeout=300, check=False)
    return tuple(sorted(cache_dir.glob("fontlist-v*.json")))


@functools.lru_cache(maxsize=1)
def _remove_abandoned_sandboxes() -> None:
    """Once per process: remove private directories (and kill the processes) left by host
    processes that died without closing their sandboxes, e.g. killed by a timeout. Each
    directory names its host's pid; a live or reused pid keeps the directory."""
    for root in Path(tempfile.gettempdir()).glob("tsb-*"):
        try:
            host_pid = int((root / _HOST_PID_FILE).read_text())
            os.kill(host_pid, 0)
        except ProcessLookupError:
            owner = root.stat().st_uid
            _remove_private_dir(root, owner if owner >= _FIRST_SANDBOX_UID else None)
        except (OSError, ValueError):
            continue


def _remove_private_dir(root: Path, uid: int | None) -> None:
    """Final cleanup, also run at interpreter exit if `close()` was never called."""
    if uid is not None:
        _kill_all_of_uid(uid)
    shutil.rmtree(root, ignore_errors=True)


# -------------------------------------------------------------------- the sandbox --

class Sandbox:
    """One episode's kernel: start it, run cells in it, close it.

    Use as a context manager. `run()` never raises for anything model code does; problems
    (timeouts, crashes, out of memory) come back in `CellResult.error`.
    """

    def __init__(
        self,
        series: dict[str, np.ndarray],
        *,
        cell_timeout_s: float = 300.0,
        memory_bytes: int = 4 * 2**30,
        network: bool = False,
        capture_figures: bool = False,
        max_figures: int = 2,
        sub_rlm_handler: SubRlmHandler | None = None,
        interrupt_grace_s: float = 3.0,
        max_tasks: int = 256,
        file_bytes: int = 2**30,
    ) -> None:
        self.series = {str(name): _as_channel(name, values) for name, values in series.items()}
        self.cell_timeout_s = float(cell_timeout_s)
        self.memory_bytes = int(memory_bytes)
        self.network = network
        self.capture_figures = capture_figures
        self.max_figures = int(max_figures)
        self.sub_rlm_handler = sub_rlm_handler
        self.interrupt_grace_s = float(interrupt_grace_s)
        self.max_tasks = int(max_tasks)
        self.file_bytes = int(file_bytes)

        self.network_mode = "host" if network else detect_network_isolation()
        self.sandbox_uid: int | None = None  # set at start where a throw-away uid is used
        self.task_limit: int | None = None  # RLIMIT_NPROC given to the kernel, if it binds
        self.workdir: Path | None = None
        self.start_seconds: float | None = None  # start(): files, kernel launch and boot
        self.restarts = 0
        self.sub_rlm_calls = 0

        self._root: Path | None = None
        self._run_dir: Path | None = None
        self._kernel_manager: KernelManager | None = None
        self._client = None
        self._kernel_log = None
        self._launch_serial = 0
        self._context_writer: threading.Thread | None = None
        self._context_error: BaseException | None = None
        self._cleanup: weakref.finalize | None = None

    # ---- lifecycle

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> Sandbox:
        """Create the private directory, write the series, start and boot the kernel.

        context.json (tens of MB of text for a long series, seconds to encode) is written
        by a background thread that `run()` waits for, so it overlaps with the kernel
        launch and with the model's first reply instead of adding to both.
        """
        if self._root is not None:
            raise SandboxError("sandbox already started")
        began = time.perf_counter()
        if self.network_mode == "guard":
            log.warning("no network namespace available: outbound sockets are refused by an "
                        "in-kernel guard only")
        _remove_abandoned_sandboxes()
        if _can_drop_to_own_uid():
            self.sandbox_uid = _allocate_uid()
        self._root = Path(tempfile.mkdtemp(prefix="tsb-"))
        (self._root / _HOST_PID_FILE).write_text(str(os.getpid()))
        self._cleanup = weakref.finalize(self, _remove_private_dir, self._root, self.sandbox_uid)
        self.workdir = self._root / "work"
        self._run_dir = self._root / "run"
        try:
            self.task_limit = self._task_limit()
            self._prepare_directories()
            self._write_series_arrays()
            self._context_writer = threading.Thread(
                target=self._write_context_json, name="tsbench-context-json", daemon=True)
            self._context_writer.start()
            self._write_kernelspec()
            self._launch_kernel()
            self._boot_kernel()
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.perf_counter() - began
        return self

    def close(self) -> None:
        """Stop the kernel, kill whatever it left behind and remove the private directory."""
        self._stop_kernel()
        if self._context_writer is not None:
            self._context_writer.join()
            self._context_writer = None
        if self._kernel_log is not None:
            self._kernel_log.close()
            self._kernel_log = None
        if self._cleanup is not None:
            self._cleanup()  # runs once; also registered for interpreter exit
        self._root = None

    # ---- running code

    def run(self, code: str) -> CellResult:
        """Run one cell and collect what it printed, returned, raised and drew."""
        if self._client is None:
            raise SandboxError("sandbox is not started")
        began = time.perf_counter()
        self._wait_for_context_file()
        output = _CellOutput(self.max_figures)
        msg_id = self._client.execute(
            code, store_history=True, allow_stdin=self.sub_rlm_handler is not None, stop_on_error=False
        )
        outcome = self._collect(msg_id, output, self.cell_timeout_s, answer_stdin=True)
        timed_out = outcome == "timeout"
        reason = ""
        if timed_out:
            try:
                self._kernel_manager.interrupt_kernel()
            except OSError:  # it died meanwhile; the next wait reports "dead"
                pass
            outcome = self._collect(msg_id, output, self.interrupt_grace_s, answer_stdin=False)
            limit = f"{self.cell_timeout_s:g} s"
            reason = (f"cell timed out after {limit} and was interrupted; variables are kept"
                      if outcome == "done" else
                      f"cell timed out after {limit} and did not stop when interrupted; "
                      "kernel restarted, series reloaded, earlier variables are lost")
        elif outcome == "dead":
            reason = ("kernel died (likely out of memory or a crash); restarted, "
                      "series reloaded, earlier variables are lost")
        if outcome == "done":
            self._drain_shell_reply(msg_id)
        else:
            self._restart_kernel()
        result = output.result()
        result.error = reason or result.error
        result.timed_out = timed_out
        result.restarted = outcome != "done"
        result.seconds = time.perf_counter() - began
        return result

    def _collect(self, msg_id: str, output: _CellOutput, timeout_s: float, *, answer_stdin: bool) -> str:
        """Read the cell's output until the kernel is idle ("done"), `timeout_s` passes
        ("timeout") or the kernel process is gone ("dead"). Time spent in the sub_rlm
        handler does not count against the cell."""
        deadline = time.monotonic() + timeout_s
        while True:
            if answer_stdin:
                deadline += self._answer_stdin_requests()
            if time.monotonic() > deadline:  # checked first: a flood of output never pauses
                return "timeout"
            try:
                message = self._client.get_iopub_msg(timeout=_POLL_S)
            except queue.Empty:
                if not self._kernel_manager.is_alive():
                    return "dead"
                continue
            if message["parent_header"].get("msg_id") == msg_id and output.add(message):
                return "done"

    def _answer_stdin_requests(self) -> float:
        """Serve pending input requests; returns the seconds spent in the sub_rlm handler."""
        spent = 0.0
        while self._client.stdin_channel.msg_ready():
            request = self._client.get_stdin_msg(timeout=0)
            prompt = request["content"].get("prompt", "")
            if not prompt.startswith(SUB_RLM_PROMPT_PREFIX) or self.sub_rlm_handler is None:
                self._client.input("")  # plain input(): model code gets an empty line
                continue
            began = time.monotonic()
            self._client.input(self._serve_sub_rlm(prompt[len(SUB_RLM_PROMPT_PREFIX):]))
            spent += time.monotonic() - began
        return spent

    def _serve_sub_rlm(self, request_json: str) -> str:
        self.sub_rlm_calls += 1
        try:
            request = json.loads(request_json, object_hook=_decode_arrays)
            answer = self.sub_rlm_handler(request["question"], request["data"])
            return json.dumps({"answer": str(answer)})
        except Exception as exc:  # the handler's failure is the model's observation
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"})

    def _drain_shell_reply(self, msg_id: str) -> None:
        """Consume the execute_reply so replies do not pile up on the shell channel."""
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                reply = self._client.get_shell_msg(timeout=0.5)
            except queue.Empty:
                return
            if reply["parent_header"].get("msg_id") == msg_id:
                return

    # ---- kernel process

    def _write_series_arrays(self) -> None:
        """A binary copy of the series for fast loading in the kernel (json is slow)."""
        arrays = {f"c{index}": values for index, values in enumerate(self.series.values())}
        np.savez(self.workdir / SERIES_FILE, names=np.array(list(self.series), dtype=str), **arrays)

    def _write_context_json(self) -> None:
        """context.json as the spec asks: {channel: list of floats}.

        Encoded one channel at a time so this thread lets go of the GIL between channels.
        """
        try:
            with open(self.workdir / CONTEXT_FILE, "w") as handle:
                handle.write("{")
                for index, (name, values) in enumerate(self.series.items()):
                    separator = ", " if index else ""
                    handle.write(f"{separator}{json.dumps(name)}: {json.dumps(values.tolist())}")
                handle.write("}")
        except BaseException as exc:  # reported by run(), which needs the file
            self._context_error = exc

    def _wait_for_context_file(self) -> None:
        if self._context_writer is not None:
            self._context_writer.join()
            self._context_writer = None
        if self._context_error is not None:
            raise SandboxError(f"could not write {CONTEXT_FILE}: {self._context_error}")

    def _prepare_directories(self) -> None:
        """work/ (the kernel's cwd) and run/ (sockets, logs, kernelspec), owned by the
        sandbox uid where there is one, with a pre-built matplotlib font list."""
        matplotlib_dir = self.workdir / ".matplotlib"
        matplotlib_dir.mkdir(parents=True)
        self._run_dir.mkdir()
        for font_list in _matplotlib_font_lists():
            shutil.copy(font_list, matplotlib_dir / font_list.name)
        if self.sandbox_uid is not None:
            for path in (self._root, self._run_dir, self.workdir, matplotlib_dir, *matplotlib_dir.iterdir()):
                os.chown(path, self.sandbox_uid, self.sandbox_uid)

    def _write_kernelspec(self) -> None:
        """A private kernelspec whose argv carries the walls (see the module docstring)."""
        kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                  "--HistoryManager.enabled=False"]
        if self.sandbox_uid is not None:
            kernel = _setpriv_prefix(self.sandbox_uid) + kernel
        limits = [f"as={self.memory_bytes}", f"fsize={self.file_bytes}", "core=0"]
        if self.task_limit is not None:
            limits.append(f"nproc={self.task_limit}")
        argv = [sys.executable, "-I", str(_BOOT_FILE), *limits, "--", *kernel]
        if self.network_mode == "netns":
            argv = ["unshare", "-n", "--", *argv]
        elif self.network_mode == "userns":
            argv = ["unshare", "-rn", "--", *argv]
        spec_dir = self._run_dir / "kernels" / _KERNEL_NAME
        spec_dir.mkdir(parents=True)
        spec = {"argv": argv, "display_name": "tsbench sandbox", "language": "python",
                "interrupt_mode": "signal"}
        (spec_dir / "kernel.json").write_text(json.dumps(spec))

    def _task_limit(self) -> int | None:
        """RLIMIT_NPROC for the kernel: a fresh uid starts at zero tasks; a shared
        non-root uid gets headroom over what it already runs. Root ignores the limit."""
        if self.sandbox_uid is not None:
            return self.max_tasks
        if os.geteuid() == 0:
            return None
        return sum(threads for _pid, threads in _tasks_of_uid(os.getuid())) + self.max_tasks

    def _kernel_env(self) -> dict[str, str]:
        env = {name: os.environ[name] for name in _INHERITED_ENV if name in os.environ}
        workdir, run_dir = str(self.workdir), str(self._run_dir)
        env.update(
            HOME=workdir,
            TMPDIR=workdir,
            MPLBACKEND="Agg",
            MPLCONFIGDIR=str(self.workdir / ".matplotlib"),
            IPYTHONDIR=os.path.join(run_dir, "ipython"),
            JUPYTER_CONFIG_DIR=os.path.join(run_dir, "jupyter"),
            JUPYTER_DATA_DIR=os.path.join(run_dir, "jupyter"),
            JUPYTER_RUNTIME_DIR=os.path.join(run_dir, "jupyter"),
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            NUMEXPR_NUM_THREADS="1",
            MALLOC_ARENA_MAX="2",
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONNOUSERSITE="1",
            PYDEVD_DISABLE_FILE_VALIDATION="1",
        )
        return env

    def _launch_kernel(self) -> None:
        """Start a kernel process and connect to it (a fresh socket set on every launch)."""
        self._launch_serial += 1
        serial = self._launch_serial
        manager = KernelManager(
            kernel_name=_KERNEL_NAME,
            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(self._run_dir / "kernels")]),
            transport="ipc",
            ip=str(self._run_dir / f"ipc{serial}"),
            connection_file=str(self._run_dir / f"kernel{serial}.json"),
        )
        if self._kernel_log is None:
            self._kernel_log = open(self._run_dir / "kernel.log", "ab")
        manager.start_kernel(env=self._kernel_env(), cwd=str(self.workdir),
                             stdout=self._kernel_log, stderr=self._kernel_log)
        self._kernel_manager = manager
        client = manager.client()
        client.start_channels(hb=False)
        self._client = client
        try:
            client.wait_for_ready(timeout=_KERNEL_READY_TIMEOUT_S)
        except RuntimeError as exc:
            raise SandboxError(f"kernel did not start: {exc}; {self._kernel_log_tail()}") from exc

    def _boot_kernel(self) -> None:
        """Run _kernel_boot.boot() in the kernel as a silent cell (no history, no output)."""
        config = {
            "workdir": str(self.workdir),
            "capture_figures": self.capture_figures,
            "max_figures": self.max_figures,
            "sub_rlm": self.sub_rlm_handler is not None,
            "network_guard": self.network_mode == "guard",
        }
        code = (
            "def _tsbench_boot():\n"
            "    import importlib.util, sys\n"
            f"    spec = importlib.util.spec_from_file_location('_tsbench_kernel_boot', {str(_BOOT_FILE)!r})\n"
            "    module = importlib.util.module_from_spec(spec)\n"
            "    sys.modules[spec.name] = module\n"
            "    spec.loader.exec_module(module)\n"
            f"    module.boot(get_ipython(), {config!r})\n"
            "_tsbench_boot()\n"
            "del _tsbench_boot\n"
        )
        reply = self._client.execute_interactive(
            code, silent=True, store_history=False, timeout=_KERNEL_READY_TIMEOUT_S,
            output_hook=lambda message: None,
        )
        if reply["content"]["status"] != "ok":
            traceback = _ANSI_ESCAPE.sub("", "\n".join(reply["content"].get("traceback", [])))
            raise SandboxError(f"kernel boot failed:\n{traceback}")

    def _restart_kernel(self) -> None:
        """A fresh kernel with the series reloaded; the working directory is kept."""
        self.restarts += 1
        self._stop_kernel()
        self._launch_kernel()
        self._boot_kernel()

    def _stop_kernel(self) -> None:
        if self._client is not None:
            self._client.stop_channels()
            self._client = None
        if self._kernel_manager is not None:
            if self._kernel_manager.has_kernel:
                self._kernel_manager.shutdown_kernel(now=True)  # SIGKILL to the process group
            self._kernel_manager = None
        if self.sandbox_uid is not None:
            _kill_all_of_uid(self.sandbox_uid)  # children that left the process group

    def _kernel_log_tail(self, chars: int = 2000) -> str:
        try:
            text = (self._run_dir / "kernel.log").read_text(errors="replace")
        except OSError:
            return "no kernel log"
        return "kernel log: " + text[-chars:]


def _as_channel(name: object, values: object) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"channel {name!r} must be one-dimensional, got shape {array.shape}")
    return array


def _decode_arrays(obj: dict) -> Any:
    """json object_hook: rebuild the arrays that the kernel tagged in sub_rlm data."""
    if set(obj) == {"__ndarray__"}:
        return np.asarray(obj["__ndarray__"])
    return obj


class _CellOutput:
    """Gathers one cell's iopub messages with bounded memory: a cell that prints for
    minutes must not fill the host. Past `keep_chars` of stdout, the middle is dropped
    and counted; the head and the latest output are kept."""

    def __init__(self, max_figures: int, keep_chars: int = _KEEP_CHARS) -> None:
        self.max_figures = max_figures
        self.keep_chars = keep_chars
        self.result_repr = ""
        self.error = ""
        self.images: list[bytes] = []
        self._head = ""
        self._tail: list[str] = []
        self._tail_chars = 0
        self._dropped_chars = 0

    def add(self, message: dict) -> bool:
        """Fold one iopub message in; True when the kernel went idle."""
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            self._add_text(content["text"])
        elif kind == "execute_result":
            self.result_repr = truncate_observation(content["data"].get("text/plain", ""), self.keep_chars)
        elif kind == "display_data":
            data = content["data"]
            if "image/png" in data:
                if len(self.images) < self.max_figures:
                    self.images.append(base64.b64decode(data["image/png"]))
            elif "text/plain" in data:
                self._add_text(data["text/plain"] + "\n")
        elif kind == "error":
            traceback = _ANSI_ESCAPE.sub("", "\n".join(content["traceback"]))
            self.error = truncate_observation(traceback, self.keep_chars)
        elif kind == "status":
            return content["execution_state"] == "idle"
        return False

    def _add_text(self, text: str) -> None:
        room = self.keep_chars - len(self._head)
        self._head += text[:room]
        rest = text[room:] if room > 0 else text
        if not rest:
            return
        self._tail.append(rest)
        self._tail_chars += len(rest)
        if self._tail_chars > 2 * self.keep_chars:  # trim rarely, so appends stay cheap
            tail = "".join(self._tail)
            self._dropped_chars += len(tail) - self.keep_chars
            self._tail = [tail[-self.keep_chars:]]
            self._tail_chars = self.keep_chars

    def result(self) -> CellResult:
        dropped = f"\n[... {self._dropped_chars} characters of output dropped ...]\n" if self._dropped_chars else ""
        return CellResult(
            stdout=self._head + dropped + "".join(self._tail),
            result_repr=self.result_repr,
            error=self.error,
            images=self.images,
        )


# ------------------------------------------------------------------ benchmarking --

def bare_roundtrip_seconds(repeats: int = 20) -> float:
    """Median round-trip of `1+1` on a plain jupyter_client kernel (tcp, no walls), to
    compare with `Sandbox.run` and see what the sandbox costs."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", stderr=subprocess.DEVNULL)
    try:
        timings = []
        for _ in range(repeats):
            began = time.perf_counter()
            client.execute_interactive("1+1", output_hook=lambda message: None, timeout=30)
            timings.append(time.perf_counter() - began)
        return float(np.median(timings))
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
