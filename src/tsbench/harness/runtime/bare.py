"""A plain ipykernel on the same transport as the sandbox (ipc), with the sandbox kernel's environment
and client loop but no jail: the floor that the sandbox's start and turn round-trip are measured
against."""

from __future__ import annotations

import os
import queue
import shutil
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec

from tsbench.harness.runtime.kernel_boot import SERIES_FILE
from tsbench.harness.runtime.kernelspec import BOOT_FILE, ipc_manager
from tsbench.harness.runtime.staging import KERNEL_OPTIONS, QUIET_ENV, series_npz


class BareKernel:
    """`with BareKernel() as bare:` a started ipykernel; `start_seconds` is launch to ready."""

    def __init__(self) -> None:
        self.start_seconds: float | None = None
        self._dir: Path | None = None
        self._manager: KernelManager | None = None
        self._client = None

    def __enter__(self) -> BareKernel:
        self._dir = Path(tempfile.mkdtemp(prefix="tsb-bare-"))
        spec = KernelSpec(
            argv=[  # through the sandbox's launcher (no limits): the same kernel, debugger off, without the jail
                sys.executable,
                str(BOOT_FILE),
                "--",
                "-m",
                "ipykernel_launcher",
                "-f",
                "{connection_file}",
                *KERNEL_OPTIONS,
            ],
            display_name="bare",
            language="python",
            interrupt_mode="message",
        )
        began = time.perf_counter()
        self._manager = ipc_manager("bare", spec, self._dir / "k", self._dir / "kernel.json")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self._dir),
            "TMPDIR": str(self._dir),
            "MPLCONFIGDIR": str(self._dir / ".matplotlib"),
            "IPYTHONDIR": str(self._dir / ".ipython"),
            "JUPYTER_RUNTIME_DIR": str(self._dir / ".jupyter"),
            **QUIET_ENV,
        }
        self._manager.start_kernel(env=env, stdout=None, stderr=None, cwd=str(self._dir))
        self._client = self._manager.client()
        self._client.start_channels(hb=False)
        self._client.wait_for_ready(timeout=60)
        self.start_seconds = time.perf_counter() - began
        return self

    def boot(self, series: dict) -> float:
        """The sandbox's own boot (numpy, scipy, the series loaded), without its jail; returns seconds."""
        began = time.perf_counter()
        (self._dir / SERIES_FILE).write_bytes(series_npz(series))
        config = {"workdir": str(self._dir), "capture_figures": False, "max_figures": 2, "sub_rlm": False}
        self.run(
            "import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('_tsbench_kernel_boot', {str(BOOT_FILE)!r})\n"
            "module = importlib.util.module_from_spec(spec)\n"
            "spec.loader.exec_module(module)\n"
            f"module.boot(get_ipython(), {config!r})\n"
        )
        return time.perf_counter() - began

    def run(self, code: str) -> None:
        """Execute and wait as `Sandbox.run` does: iopub until idle, then the shell reply."""
        msg_id = self._client.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                message = self._client.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            if (
                message["parent_header"].get("msg_id") == msg_id
                and message["msg_type"] == "status"
                and message["content"]["execution_state"] == "idle"
            ):
                break
        else:
            raise RuntimeError(f"bare kernel: {code!r} did not finish")
        reply = self._client.get_shell_msg(timeout=5)
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"bare kernel: {code!r} failed")

    def roundtrip_seconds(self, code: str = "1+1") -> float:
        began = time.perf_counter()
        self.run(code)
        return time.perf_counter() - began

    def __exit__(self, *exc_info: object) -> None:
        if self._client is not None:
            self._client.stop_channels()
        if self._manager is not None:
            self._manager.shutdown_kernel(now=True)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def bare_roundtrip_seconds(repeats: int = 20) -> float:
    """Median round-trip of `1+1` on a plain ipykernel on the same transport (ipc) with no
    jail, to compare with `Sandbox.run` and see what the sandbox costs."""
    import statistics

    with BareKernel() as bare:
        timings = [bare.roundtrip_seconds() for _ in range(repeats)]
    return float(statistics.median(timings))
