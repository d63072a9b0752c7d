"""The one error the sandbox raises for its own failures (never for what model code does)."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """The sandbox could not be started or booted, or the jail is unavailable (one line: why, how to fix)."""
