"""CPU and peak RSS of this process and every descendant (kernels in their jails included), sampled
from /proc: a jailed kernel's CPU never reaches this process's RUSAGE_CHILDREN (it is reaped inside
its jail's pid namespace), and peak RSS of a tree is a sum taken at one moment."""

from __future__ import annotations

import os
import threading
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _stat_all() -> dict[int, tuple[int, float, int]]:
    """pid -> (parent pid, CPU seconds, RSS bytes) of every process readable now."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, int(fields[21]) * _PAGE)
    return found


class TreeSampler:
    """`with TreeSampler() as tree:` samples every `interval_s`; afterwards `cpu_s` (this process's CPU
    in the block plus every descendant's CPU as last seen), `host_cpu_s` (this process's own, less the
    sampler's scans of /proc) and `peak_rss` / `peak_host_rss` (bytes)."""

    def __init__(self, interval_s: float = 0.1) -> None:
        self.interval_s = interval_s
        self.root = os.getpid()
        self._cpu: dict[int, float] = {}
        self._self_cpu0 = 0.0
        self.cpu_s = self.descendants_cpu_s = self.host_cpu_s = self.sampler_cpu_s = 0.0
        self.peak_rss = self.peak_host_rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)

    def sample(self) -> None:
        procs = _stat_all()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _cpu, _rss) in procs.items():
            children.setdefault(ppid, []).append(pid)
        total, stack = 0, [self.root]
        while stack:
            pid = stack.pop()
            if pid not in procs:
                continue
            total += procs[pid][2]
            if pid != self.root:
                self._cpu[pid] = max(self._cpu.get(pid, 0.0), procs[pid][1])
            stack.extend(children.get(pid, ()))
        self.peak_rss = max(self.peak_rss, total)
        if self.root in procs:
            self.peak_host_rss = max(self.peak_host_rss, procs[self.root][2])

    def _loop(self) -> None:
        import time

        while not self._stop.wait(self.interval_s):
            self.sample()
        self.sampler_cpu_s = time.thread_time()  # this thread's own CPU: the scans, not the work measured

    def __enter__(self) -> TreeSampler:
        before = _stat_all()
        self._self_cpu0 = before[self.root][1]
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
        self.descendants_cpu_s = sum(self._cpu.values())
        own = _stat_all()[self.root][1] - self._self_cpu0
        self.host_cpu_s = max(0.0, own - self.sampler_cpu_s)
        self.cpu_s = own + self.descendants_cpu_s
