"""sha256 of a file while it is being appended to, so a writer's manifest gets each file's hash
without a second pass over the finished file (for a paper-size split that pass was about a second).

After each append the writer feeds the new bytes from the page cache, on its own thread, through one
reused buffer: no fresh memory per chunk, and hashlib releases the GIL on large blocks."""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK_BYTES = 8 * 2**20


class WrittenHash:
    """Hashes the bytes of `path` from the start, up to wherever `update` is told the file ends."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._digest = hashlib.sha256()
        self._buffer = bytearray(CHUNK_BYTES)
        self.size = 0

    def update(self, end: int) -> None:
        """Hash bytes [size, end): they must already be written (flushed to the OS)."""
        view = memoryview(self._buffer)
        with open(self.path, "rb", buffering=0) as fh:
            fh.seek(self.size)
            while self.size < end:
                got = fh.readinto(view[: min(CHUNK_BYTES, end - self.size)])
                if not got:
                    raise OSError(f"{self.path} ended at byte {self.size}, before {end}")
                self._digest.update(view[:got])
                self.size += got

    def hexdigest(self) -> str:
        return self._digest.hexdigest()
