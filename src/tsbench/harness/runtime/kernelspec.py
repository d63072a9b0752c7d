"""A kernel's jupyter_client manager, from a kernelspec held in host memory (nothing read from disk)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

BOOT_FILE = Path(__file__).with_name("kernel_boot.py")


class InMemorySpec(KernelSpecManager):
    """Hands jupyter_client the one kernelspec built in host memory."""

    def __init__(self, spec: KernelSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._spec = spec

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return self._spec


def ipc_manager(name: str, spec: KernelSpec, sockets: Path, connection_file: Path) -> KernelManager:
    """A manager for `spec` on jupyter_client's `ipc` transport, its unix sockets named `sockets`*."""
    return KernelManager(
        kernel_name=name,
        kernel_spec_manager=InMemorySpec(spec),
        transport="ipc",
        ip=str(sockets),
        connection_file=str(connection_file),
    )
