"""A plain ipykernel on the same transport as the sandbox (ipc) and no jail: the floor that the
sandbox's start and turn round-trip are measured against."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec

from tsbench.harness.runtime.sandbox import _InMemorySpec


class BareKernel:
    """`with BareKernel() as bare:` a started ipykernel; `start_seconds` is launch to ready."""

    def __init__(self) -> None:
        self.start_seconds: float | None = None
        self._dir: Path | None = None
        self._manager: KernelManager | None = None
        self._client = None

    def __enter__(self) -> BareKernel:
        self._dir = Path(tempfile.mkdtemp(prefix="tsb-bare-"))
        spec = KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                                "--HistoryManager.enabled=False"],
                          display_name="bare", language="python", interrupt_mode="message")
        began = time.perf_counter()
        self._manager = KernelManager(kernel_name="bare", kernel_spec_manager=_InMemorySpec(spec), transport="ipc",
                                      ip=str(self._dir / "k"), connection_file=str(self._dir / "kernel.json"))
        self._manager.start_kernel(stdout=None, stderr=None, cwd=str(self._dir))
        self._client = self._manager.client()
        self._client.start_channels(hb=False)
        self._client.wait_for_ready(timeout=60)
        self.start_seconds = time.perf_counter() - began
        return self

    def run(self, code: str) -> None:
        reply = self._client.execute_interactive(code, output_hook=lambda message: None, timeout=60)
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
