"""The kernel's own stdout/stderr (and bwrap's errors): kept in host memory, bounded.

Model code can write to the kernel's file descriptors 1 and 2 directly (os.write), past IPython's
capture. Those go into a pipe whose host end keeps only the last `keep_bytes`, so no amount of it
reaches the host's disk or fills its memory; the tail is quoted in start-up errors.
"""

from __future__ import annotations

import os
import threading


class LogTail:
    def __init__(self, keep_bytes: int = 64 * 1024) -> None:
        self.keep_bytes = keep_bytes
        self._data = bytearray()
        self._lock = threading.Lock()
        self._readers: list[threading.Thread] = []

    def writer(self) -> int:
        """A fresh pipe for one launch: returns the write end (to hand to the child, then close)."""
        read_end, write_end = os.pipe()
        reader = threading.Thread(target=self._drain, args=(read_end,), name="tsbench-kernel-log", daemon=True)
        reader.start()
        self._readers = [r for r in self._readers if r.is_alive()] + [reader]
        return write_end

    def _drain(self, read_end: int) -> None:
        try:
            while chunk := os.read(read_end, 65536):
                with self._lock:
                    self._data += chunk
                    if len(self._data) > 2 * self.keep_bytes:
                        del self._data[: len(self._data) - self.keep_bytes]
        finally:
            os.close(read_end)

    def tail(self, chars: int = 2000, wait_s: float = 0.0) -> str:
        """The last `chars` characters; `wait_s`: first give readers that long to reach the end."""
        for reader in self._readers:
            reader.join(wait_s)
        with self._lock:
            return bytes(self._data[-self.keep_bytes :]).decode(errors="replace")[-chars:]
