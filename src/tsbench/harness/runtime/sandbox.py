"""The sandbox: a fresh ipykernel per episode, where model-written code runs, in a jail.

Model code never runs in the host process. Each `Sandbox` starts its own kernel under bubblewrap
(`jail.py`: namespaces, no capabilities, a read-only root of the interpreter and system libraries,
size-capped private tmpfs for the working directory and /tmp), over jupyter_client's `ipc` transport:
unix sockets in a private host directory, the only one bound into the jail. Bounds: `limits.py`;
`unsafe=True` (--unsafe-sandbox) is `unsafe.py`'s weaker mode. What enters the jail is copied by
value (series.npz, `files`, `readonly_paths`; context.json is written by a thread while the kernel
starts, and `run()` waits for it); a pre-started jail from `pool.py` gets the series as a read-only
bound host file. Connection files and the kernel log stay where the kernel cannot reach.

A cell past `cell_timeout_s` (or past a tighter deadline of the thread's: the episode's wall clock, the
cell that called this sub_rlm episode; core/deadline.py) is interrupted; the time spent serving its
sub_rlm calls is the cell's time too, and each is served inside the cell's deadline; one that does not
stop within `interrupt_grace_s` (scaled by the host's load, at most tenfold: a busy host answers late), or a
kernel that dies (a crash, `os._exit`, the memory bound), is restarted in the same jail with the
series reloaded (files it wrote are gone with the old tmpfs), and the episode goes on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec

from tsbench.core.deadline import load_factor, remaining, within
from tsbench.core.unicode_text import valid_text
from tsbench.harness.runtime.behind import StartBehind
from tsbench.harness.runtime.cleanup import (
    kill_kernel_now,
    make_private_dir,
    release_event_loop,
    remove_abandoned_sandboxes,
    remove_private_dir,
)
from tsbench.harness.runtime.errors import SandboxError
from tsbench.harness.runtime.jail import BOOT_PATH, CONNECTION_PATH, SANDBOX_UID, WORKDIR, Jail
from tsbench.harness.runtime.kernel_boot import SERIES_FILE, SUB_RLM_PROMPT_PREFIX
from tsbench.harness.runtime.kernelspec import BOOT_FILE, ipc_manager
from tsbench.harness.runtime.limits import (
    EpisodeCgroup,
    SandboxLimits,
    allocate_uid,
    kill_all_of_uid,
    task_limit_for,
)
from tsbench.harness.runtime.logtail import LogTail
from tsbench.harness.runtime.message_bound import (
    CELL_OUTPUT_BYTES,
    EPISODE_OUTPUT_BYTES,
    KernelReader,
    OutputBudget,
    RefusalWatch,
    bound_client,
)
from tsbench.harness.runtime.observation import (
    OBSERVATION_MAX_CHARS,
    CellOutput,
    CellResult,
    strip_ansi,
    truncate_observation,
)
from tsbench.harness.runtime.pool import claim_from_pool, warm_kernel
from tsbench.harness.runtime.staging import (
    CONTEXT_FILE,
    KERNEL_OPTIONS,
    MATPLOTLIB_DIR,
    as_channel,
    checked_files,
    jail_env,
    matplotlib_font_lists,
    series_npz,
    stage_copy,
    stage_unsafe_workdir,
    write_context_json,
)
from tsbench.harness.runtime.unsafe import (
    can_drop_to_own_uid,
    detect_network_isolation,
    unsafe_command,
    unsafe_env,
    unsafe_kernel_argv,
)

if TYPE_CHECKING:
    from tsbench.harness.runtime.sub_rlm_reply import SubRlmHandler

__all__ = ["OBSERVATION_MAX_CHARS", "CellResult", "Sandbox", "SandboxError", "truncate_observation"]

log = logging.getLogger(__name__)

_POLL_S = 0.05
_KERNEL_READY_TIMEOUT_S = 60.0
_LOST_IDLE_GRACE_S = 0.5  # after a refused message: wait this long past the shell reply for `idle`


class Sandbox:
    """One episode's kernel: start it, run cells in it, close it.

    Use as a context manager. `run()` never raises for anything model code does; problems
    (timeouts, crashes, out of memory) come back in `CellResult.error`.

    `series` may be empty (tasks that work on `files` only). `files` are written into the
    working directory by value before the kernel boots. `readonly_paths` are host files or
    directories the kernel may read (e.g. a compile cache): copied at start and mounted
    read-only at the same path; never pass anything that holds gold.
    """

    def __init__(
        self,
        series: dict[str, np.ndarray] | None = None,
        *,
        cell_timeout_s: float = 300.0,
        memory_bytes: int = 4 * 2**30,
        network: bool = False,
        capture_figures: bool = False,
        max_figures: int = 2,
        sub_rlm_handler: SubRlmHandler | None = None,
        interrupt_grace_s: float = 3.0,
        max_tasks: int = 64,
        file_bytes: int = 2**30,
        work_bytes: int = 2**30,
        tmp_bytes: int = 256 * 2**20,
        files: dict[str, bytes] | None = None,
        readonly_paths: tuple[str | Path, ...] | list[str | Path] = (),
        unsafe: bool = False,
        cell_output_bytes: int = CELL_OUTPUT_BYTES,
        episode_output_bytes: int = EPISODE_OUTPUT_BYTES,
    ) -> None:
        self.series = {str(name): as_channel(name, values) for name, values in (series or {}).items()}
        self.files = checked_files(files)
        self.readonly_paths = [Path(path).absolute() for path in readonly_paths]
        self.cell_timeout_s = float(cell_timeout_s)
        self.limits = SandboxLimits(
            memory_bytes=int(memory_bytes),
            max_tasks=int(max_tasks),
            file_bytes=int(file_bytes),
            work_bytes=int(work_bytes),
            tmp_bytes=int(tmp_bytes),
        )
        self.network = network
        self.capture_figures = capture_figures
        self.max_figures = int(max_figures)
        self.sub_rlm_handler = sub_rlm_handler
        self.interrupt_grace_s = float(interrupt_grace_s)
        self.unsafe = bool(unsafe)
        # What the kernel may send the host (message_bound.py); the episode's part spans restarts.
        self.output_budget = OutputBudget(int(cell_output_bytes), int(episode_output_bytes))

        if self.unsafe:
            self.network_mode = "host" if network else detect_network_isolation()
        else:
            self.network_mode = "host" if network else "jail"
        self.sandbox_uid: int | None = None  # host uid the kernel runs as, where it has its own
        self.task_limit: int | None = None  # RLIMIT_NPROC given to the kernel, if it binds
        self.cgroup: EpisodeCgroup | None = None
        self.workdir: Path | None = None  # the working directory as the kernel sees it
        self.start_seconds: float | None = None  # start(): files, kernel launch and boot
        self.restarts = 0
        self.sub_rlm_calls = 0

        self._root: Path | None = None
        self._ctl_dir: Path | None = None  # connection files, kernel log: the host's only
        self._ipc_dir: Path | None = None  # the transport's sockets: the one directory the kernel writes
        self._context_path: Path | None = None
        self._jail: Jail | None = None
        self._kernel_manager: KernelManager | None = None
        self._client = None
        self._refusals: RefusalWatch | None = None
        self._reader: KernelReader | None = None
        self._replied_to: str | None = None  # the cell whose execute_reply _collect took off the shell channel
        self._kernel_log = LogTail()
        self._launch_serial = 0
        self._context_writer: threading.Thread | None = None
        self._context_error: BaseException | None = None
        self._cleanup: weakref.finalize | None = None
        self.deferred_series = False  # a pool's pre-started jail: series.npz is a bound host file, filled later
        self._starting: StartBehind | None = None  # start() running behind the episode (behind.py)

    # ---- lifecycle

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def limits_description(self) -> str:
        """Which whole-episode bound applies (see limits.py)."""
        if self.cgroup is not None:
            return (
                f"{self.cgroup.describe()}: {self.limits.episode_memory_bytes()} bytes, {self.limits.max_tasks} tasks"
            )
        return f"rlimits: {self.limits.memory_bytes} bytes per process, {self.task_limit} tasks"

    def start(self) -> Sandbox:
        """Create the private directory, stage the inputs, start and boot the kernel."""
        if self._root is not None:
            raise SandboxError("sandbox already started")
        began = time.perf_counter()
        if not self.deferred_series and claim_from_pool(self):  # a pre-started jail (pool.py)
            self.start_seconds = time.perf_counter() - began
            return self
        if self.network_mode == "guard":
            log.warning("no network namespace available: outbound sockets are refused by an in-kernel guard only")
        remove_abandoned_sandboxes()
        own_uid = os.geteuid() == 0 and (not self.unsafe or can_drop_to_own_uid())
        if own_uid:
            self.sandbox_uid = allocate_uid()
        self._root = make_private_dir()
        self._cleanup = weakref.finalize(
            self, remove_private_dir, self._root, self.sandbox_uid if self.unsafe else None, self.sandbox_uid
        )
        try:
            self.task_limit = task_limit_for(own_uid, self.limits.max_tasks)
            self._prepare_directories()
            if self.unsafe:
                self.workdir = stage_unsafe_workdir(self._root / "work", self.series, self.files, self.sandbox_uid)
                self._context_path = self.workdir / CONTEXT_FILE
            else:
                self._stage_jail()
            if not self.deferred_series:
                self._context_writer = threading.Thread(
                    target=self._write_context_json, name="tsbench-context-json", daemon=True
                )
                self._context_writer.start()
            self._launch_kernel()
            warm_kernel(self) if self.deferred_series else self._boot_kernel()
        except BaseException:
            self.close()
            raise
        self.start_seconds = time.perf_counter() - began
        return self

    def wait_started(self) -> None:
        """Wait for a `start()` running behind the episode (behind.py); raise what it raised."""
        if self._starting is not None:
            self._starting.wait()

    def close(self) -> None:
        """Stop the kernel (the jail and everything in it dies) and remove the private directory."""
        with contextlib.suppress(BaseException):
            self.wait_started()  # a start behind still running owns the fields below until it ends
        self._stop_kernel()
        if self._context_writer is not None:
            self._context_writer.join()
            self._context_writer = None
        if self._jail is not None:
            self._jail.close()
            self._jail = None
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self._cleanup is not None:
            self._cleanup()  # runs once; also registered for interpreter exit
        self._root = None
        self.series, self.sub_rlm_handler = {}, None  # the handler's episode holds this box: no cycle is left
        release_event_loop()  # the loop jupyter_client's calls made in this thread (made again if needed)

    # ---- running code

    def run(self, code: str, timeout_s: float | None = None) -> CellResult:
        """Run one cell and collect what it printed, returned, raised and drew; `timeout_s` can
        only shorten the sandbox's own cell timeout (an episode's remaining wall clock)."""
        self.wait_started()
        if self._client is None:
            raise SandboxError("sandbox is not started")
        began = time.perf_counter()
        self._wait_for_context_file()
        self.output_budget.start_cell()
        output = CellOutput(self.max_figures)
        code = valid_text(code)[0]  # a lone surrogate the model wrote cannot cross the wire (U+FFFD instead)
        msg_id = self._client.execute(
            code, store_history=True, allow_stdin=self.sub_rlm_handler is not None, stop_on_error=False
        )
        cell_timeout = self.cell_timeout_s if timeout_s is None else max(0.0, min(self.cell_timeout_s, timeout_s))
        cell_timeout = remaining(cell_timeout)  # no cell outlives a deadline over the thread's work
        outcome = self._collect(msg_id, output, cell_timeout, answer_stdin=True)
        timed_out = outcome == "timeout"
        lost = "kernel restarted, series reloaded, earlier variables" + (
            " are lost" if self.unsafe else " and written files are lost"
        )
        reason = ""
        if timed_out:
            try:
                self._kernel_manager.interrupt_kernel()
            except (OSError, RuntimeError):  # it died meanwhile; the next wait reports "dead"
                pass
            grace = self.interrupt_grace_s * min(load_factor(), 10.0)  # a busy host answers late, not never
            outcome = self._collect(msg_id, output, grace, answer_stdin=False)
            limit = f"{cell_timeout:g} s"
            reason = (
                f"cell timed out after {limit} and was interrupted; variables are kept"
                if outcome == "done"
                else f"cell timed out after {limit} and did not stop when interrupted; {lost}"
            )
        elif outcome == "dead":
            reason = f"kernel died (likely out of memory or a crash); {lost}"
        if outcome == "done":
            self._drain_shell_reply(msg_id)
        else:
            self._restart_kernel()
        result = output.result()
        result.stdout += self.output_budget.marker()
        result.error = reason or result.error
        result.timed_out = timed_out
        result.restarted = outcome != "done"
        result.seconds = time.perf_counter() - began
        return result

    def _collect(self, msg_id: str, output: CellOutput, timeout_s: float, *, answer_stdin: bool) -> str:
        """Read the cell's output until the kernel is idle ("done"), `timeout_s` passes
        ("timeout") or the kernel process is gone ("dead"). Time spent in the sub_rlm
        handler counts against the cell, and the handler runs within the cell's deadline. Once the host refused or dropped a message of the
        cell, its `idle` may be lost with it: then the shell's execute_reply ends the cell, once the
        kernel has sent nothing for a moment."""
        deadline = time.monotonic() + timeout_s
        budget = self.output_budget
        replied_at = None
        while True:
            if answer_stdin:
                self._answer_stdin_requests(deadline)
            if time.monotonic() > deadline:  # checked first: a flood of output never pauses
                return "timeout"
            message = self._reader.get("iopub", budget, _POLL_S)
            if message is None:
                if not self._kernel_manager.is_alive():
                    return "dead"
                output.refused_messages += len(self._refusals.poll())
                if (output.refused_messages or budget.cut) and self._replied(msg_id):
                    replied_at = replied_at or time.monotonic()
                    if time.monotonic() - max(replied_at, self._reader.last_message) > _LOST_IDLE_GRACE_S:
                        return "done"
                continue
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            try:
                if output.add(message):
                    return "done"
            except (KeyError, TypeError, AttributeError, ValueError):  # a message of the wrong shape
                budget.malformed += 1

    def _answer_stdin_requests(self, deadline: float) -> None:
        """Serve pending input requests; a sub_rlm request within what is left of the cell (`deadline`)."""
        budget = self.output_budget
        while self._reader.ready("stdin"):
            lost = budget.dropped + budget.malformed
            request = self._reader.get("stdin", budget)
            if request is None:
                if budget.dropped + budget.malformed > lost:  # the kernel waits for an answer all the same
                    self._client.input(json.dumps({"error": "request dropped unread: past the output budget"}))
                continue
            prompt = str(request["content"].get("prompt", ""))
            if not prompt.startswith(SUB_RLM_PROMPT_PREFIX) or self.sub_rlm_handler is None:
                self._client.input("")  # plain input(): model code gets an empty line
                continue
            with within(deadline - time.monotonic(), "cell_timeout"):
                self._client.input(self._serve_sub_rlm(prompt[len(SUB_RLM_PROMPT_PREFIX) :]))

    def _serve_sub_rlm(self, request_json: str) -> str:
        from tsbench.harness.runtime.sub_rlm_reply import sub_rlm_reply  # depth > 0 only

        self.sub_rlm_calls += 1
        return sub_rlm_reply(self.sub_rlm_handler, request_json)

    def _replied(self, msg_id: str) -> bool:
        """Whether the cell's execute_reply has come (the shell channel read without waiting)."""
        while self._replied_to != msg_id and self._reader.ready("shell"):
            reply = self._reader.get("shell", self.output_budget)
            if reply is not None and reply["parent_header"].get("msg_id") == msg_id:
                self._replied_to = msg_id
        return self._replied_to == msg_id

    def _drain_shell_reply(self, msg_id: str) -> None:
        """Consume the execute_reply so replies do not pile up on the shell channel."""
        if self._replied_to == msg_id:
            return
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            reply = self._reader.get("shell", self.output_budget, 0.5)
            if reply is None:
                if not self._reader.ready("shell"):
                    return
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                return

    # ---- staging the inputs

    def _prepare_directories(self) -> None:
        """ctl/ (host only: connection files), ipc/ (the sockets; on root hosts owned by the sandbox uid
        only while a kernel starts, by root once its sockets are bound) and input/ (what the host writes
        for the kernel to read)."""
        self._ctl_dir = self._root / "ctl"
        self._ctl_dir.mkdir(mode=0o700)
        self._ipc_dir = self._root / "ipc"
        self._ipc_dir.mkdir(mode=0o700)
        if self.sandbox_uid is not None:
            os.chown(self._ipc_dir, self.sandbox_uid, self.sandbox_uid)

    def _stage_jail(self) -> None:
        """The jail's spec and what it gets by value; context.json is bound from input/."""
        self.workdir = Path(WORKDIR)
        input_dir = self._root / "input"
        input_dir.mkdir(mode=0o755)
        self._context_path = input_dir / CONTEXT_FILE
        self._context_path.touch(mode=0o644)  # the writer fills this inode; the jail binds it
        readonly = {WORKDIR + "/" + CONTEXT_FILE: str(self._context_path)}
        if self.deferred_series:  # the pool's claim writes the series into this inode
            (input_dir / SERIES_FILE).touch(mode=0o644)
            readonly[WORKDIR + "/" + SERIES_FILE] = str(input_dir / SERIES_FILE)
        for index, path in enumerate(self.readonly_paths):
            readonly[str(path)] = str(stage_copy(path, input_dir / f"ro{index}"))
        limits = self.limits.rlimit_args(self.task_limit)
        if self.sandbox_uid is not None:
            limits.append(f"uid={SANDBOX_UID}")
        command = [
            sys.executable,
            "-I",
            BOOT_PATH,
            *limits,
            "--",
            "-m",
            "ipykernel_launcher",
            "-f",
            CONNECTION_PATH,
            *KERNEL_OPTIONS,
        ]
        self.cgroup = EpisodeCgroup.create(self._root.name, self.limits)
        jail = Jail(
            command=command,
            ipc_dir=str(self._ipc_dir),
            env=jail_env(),
            work_bytes=self.limits.work_bytes,
            tmp_bytes=self.limits.tmp_bytes,
            readonly=readonly,
            dirs={MATPLOTLIB_DIR: 0o777},
            network=self.network,
            host_uid=self.sandbox_uid,
            cgroup=self.cgroup,
        )
        self._jail = jail
        jail.put(BOOT_PATH, BOOT_FILE.read_bytes())
        total = sum(len(data) for data in self.files.values())
        if total > self.limits.work_bytes // 2:
            raise SandboxError(
                f"sandbox files take {total} bytes, over half the working directory's "
                f"quota ({self.limits.work_bytes} bytes)"
            )
        if not self.deferred_series:
            jail.put(f"{WORKDIR}/{SERIES_FILE}", series_npz(self.series))
        for name, data in self.files.items():
            jail.put(f"{WORKDIR}/{name}", data, mode=0o666)
        for font_list in matplotlib_font_lists():
            jail.put(f"{MATPLOTLIB_DIR}/{font_list.name}", font_list.read_bytes())

    def _write_context_json(self) -> None:
        """context.json as the spec asks: {channel: list of floats} (staging.write_context_json)."""
        try:
            write_context_json(self._context_path, self.series)
        except BaseException as exc:  # reported by run(), which needs the file
            self._context_error = exc
        finally:  # series.npz was written first and a restart reloads from it: the float64 copy goes now
            self.series = {}

    def _wait_for_context_file(self) -> None:
        if self._context_writer is not None:
            self._context_writer.join()
            self._context_writer = None
        if self._context_error is not None:
            raise SandboxError(f"could not write {CONTEXT_FILE}: {self._context_error}")

    # ---- kernel process

    def _launch_kernel(self) -> None:
        """Start a kernel process and connect to it (a fresh socket set on every launch)."""
        self._launch_serial += 1
        serial = self._launch_serial
        spec = KernelSpec(
            argv=["python"],
            display_name="tsbench sandbox",
            language="python",
            interrupt_mode="signal" if self.unsafe else "message",
        )
        manager = ipc_manager(
            "tsbench-sandbox", spec, self._ipc_dir / f"k{serial}", self._ctl_dir / f"kernel{serial}.json"
        )
        manager.write_connection_file()  # now, so that the jail gets it by value
        passed: list[int] = []
        if self.unsafe:  # the kernel reads the host-only file with CAP_DAC_READ_SEARCH
            spec.argv = unsafe_command(
                sys.executable,
                str(BOOT_FILE),
                self.limits.rlimit_args(self.task_limit),
                unsafe_kernel_argv(manager.connection_file),
                uid=self.sandbox_uid,
                network_mode=self.network_mode,
            )
            env, cwd = unsafe_env(self.workdir), str(self.workdir)
        else:
            self._jail.put(CONNECTION_PATH, Path(manager.connection_file).read_bytes())
            passed = self._jail.open_launch()
            spec.argv = self._jail.argv()
            env, cwd = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, str(self._root)
        if self._jail is not None and self.sandbox_uid is not None:
            os.chown(self._ipc_dir, self.sandbox_uid, self.sandbox_uid)  # the new kernel binds its sockets
        log_fd = self._kernel_log.writer()
        try:
            manager.start_kernel(env=env, cwd=cwd, stdout=log_fd, stderr=log_fd, pass_fds=passed)
        except OSError as exc:
            raise SandboxError(f"cannot start the kernel: {exc}") from exc
        finally:
            os.close(log_fd)
            self._kernel_manager = manager
        if not self.unsafe:
            self._jail.after_spawn(self._kernel_log_tail)
        client = manager.client()
        bound_client(client)
        client.start_channels(hb=False)
        self._client = client
        self._refusals = RefusalWatch(client)
        self._reader = KernelReader(client)
        try:
            client.wait_for_ready(timeout=_KERNEL_READY_TIMEOUT_S)
        except RuntimeError as exc:
            raise SandboxError(f"kernel did not start: {exc}; {self._kernel_log_tail()}") from exc
        if self._jail is not None and self.sandbox_uid is not None:
            os.chown(self._ipc_dir, 0, 0)  # sockets bound: from now on the kernel cannot write there

    def _boot_kernel(self) -> None:
        """Run kernel_boot.boot() in the kernel as a silent cell (no history, no output)."""
        config = {
            "workdir": str(self.workdir),
            "capture_figures": self.capture_figures,
            "max_figures": self.max_figures,
            "sub_rlm": self.sub_rlm_handler is not None,
            "guards": self.unsafe,
            "network_guard": self.network_mode == "guard",
        }
        boot_file = str(BOOT_FILE) if self.unsafe else BOOT_PATH
        code = (
            "def _tsbench_boot():\n"
            "    import importlib.util, sys\n"
            f"    spec = importlib.util.spec_from_file_location('_tsbench_kernel_boot', {boot_file!r})\n"
            "    module = importlib.util.module_from_spec(spec)\n"
            "    sys.modules[spec.name] = module\n"
            "    spec.loader.exec_module(module)\n"
            f"    module.boot(get_ipython(), {config!r})\n"
            "_tsbench_boot()\n"
            "del _tsbench_boot\n"
        )
        reply = self._client.execute_interactive(
            code,
            silent=True,
            store_history=False,
            timeout=_KERNEL_READY_TIMEOUT_S,
            output_hook=lambda message: None,
        )
        if reply["content"]["status"] != "ok":
            traceback = strip_ansi("\n".join(reply["content"].get("traceback", [])))
            raise SandboxError(f"kernel boot failed:\n{traceback}")

    def _restart_kernel(self) -> None:
        """A fresh kernel, in the same jail, with the series reloaded."""
        self.restarts += 1
        self._stop_kernel()
        self._launch_kernel()
        self._boot_kernel()

    def _stop_kernel(self) -> None:
        if self._refusals is not None:
            self._refusals.close()
            self._refusals = None
        self._reader = None
        if self._client is not None:
            self._client.stop_channels()
            self._client = None
        if self._kernel_manager is not None:
            if self._kernel_manager.has_kernel:
                kill_kernel_now(self._kernel_manager)
                self._kernel_manager.shutdown_kernel(now=True)
            self._kernel_manager = None
        if self._jail is not None:
            self._jail.close_launch()
        if self.unsafe and self.sandbox_uid is not None:
            kill_all_of_uid(self.sandbox_uid)  # children that left the process group

    def _kernel_log_tail(self, chars: int = 2000) -> str:
        """The end of the kernel's own output (bwrap's errors land there too), for error messages."""
        text = self._kernel_log.tail(chars, wait_s=0.5)
        return "kernel log: " + text if text else "no kernel output"
