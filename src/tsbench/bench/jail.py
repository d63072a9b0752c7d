"""The jail's cost, each beside its floor, measured side by side in one run: kernel start (launch,
ready, boot: numpy, scipy and the series loaded) and the `1+1` turn round-trip, jailed
(`Sandbox`) vs a bare ipykernel on the same transport (ipc) running the same boot. Starts alternate
jail / bare; turns alternate one jailed and one bare `1+1` on two live kernels, so machine load
hits both alike. Goals (issue 12): start <= 1.3x, turn <= 1.5x.

Also the host's memory under hostile output (issue 29): the peak RSS of a fresh host process that runs one
sandbox and one cell printing 900 MiB in one message, beside the same for a trivial cell. Goal: < 1 GiB."""

from __future__ import annotations

import statistics
import subprocess
import time

import numpy as np

from tsbench.bench.common import measure_in_child
from tsbench.harness.runtime.bare import BareKernel
from tsbench.harness.runtime.jail import check_jail
from tsbench.harness.runtime.sandbox import Sandbox

START_GOAL, TURN_GOAL = 1.3, 1.5
HOST_RSS_GOAL_BYTES = 2**30


def _bwrap_version() -> str:
    try:
        return subprocess.run(["bwrap", "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return "bwrap missing"


def measure(rounds: int = 5, turns: int = 60) -> dict:
    check_jail()
    series = {"a": np.sin(np.arange(4096) / 7.0)}
    jail_starts, bare_starts = [], []
    bounds = ""
    for index in range(2 * rounds):
        if (index + index // 2) % 2:  # bare, jail, jail, bare, bare, jail, ...
            with BareKernel() as bare:
                bare_starts.append(bare.start_seconds + bare.boot(series))
        else:
            with Sandbox(series) as box:
                jail_starts.append(box.start_seconds)
                bounds = box.limits_description
    jail_turns, bare_turns = [], []
    with BareKernel() as bare, Sandbox(series) as box:
        bare.boot(series)
        for _ in range(5):  # warm both
            bare.run("1+1")
            box.run("1+1")
        for index in range(turns):
            if index % 2:  # who goes first alternates, so neither always follows the other
                bare_turns.append(bare.roundtrip_seconds("1+1"))
            began = time.perf_counter()
            box.run("1+1")
            jail_turns.append(time.perf_counter() - began)
            if not index % 2:
                bare_turns.append(bare.roundtrip_seconds("1+1"))
    start_j, start_b = statistics.median(jail_starts), statistics.median(bare_starts)
    turn_j, turn_b = statistics.median(jail_turns), statistics.median(bare_turns)
    return {
        "start_jail_s": start_j,
        "start_bare_s": start_b,
        "start_ratio": start_j / start_b,
        "turn_jail_s": turn_j,
        "turn_bare_s": turn_b,
        "turn_ratio": turn_j / turn_b,
        "bounds": bounds,
        "bwrap": _bwrap_version(),
    }


def host_rss_for_print(mib: int) -> dict:
    """In this process (run it in a fresh one): peak RSS before and after one cell that prints `mib` MiB
    in one message, whether the observation says the output was cut, and whether the episode goes on."""
    import resource

    def peak() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    with Sandbox({}, cell_timeout_s=120) as box:
        box.run("1+1")
        before = peak()
        cell = box.run(f"print('x' * ({int(mib)} * 2**20))" if mib else "print('x')")
        after = peak()
        goes_on = box.run("6 * 7").result_repr == "42"
    return {
        "peak_before_bytes": before,
        "peak_after_bytes": after,
        "growth_bytes": after - before,
        "cut": "output cut" in cell.stdout,
        "goes_on": goes_on,
        "seconds": cell.seconds,
    }


def measure_host_rss(mib: int = 900) -> dict:
    """Peak RSS of a fresh host process for a trivial cell and for a `mib` MiB print."""
    _, trivial_peak, _ = measure_in_child(host_rss_for_print, 0)
    _, big_peak, big = measure_in_child(host_rss_for_print, mib)
    return {"mib": mib, "trivial_peak_bytes": trivial_peak, "print_peak_bytes": big_peak, **big}


def main() -> dict:
    rss = measure_host_rss()
    rss_ok = "ok" if rss["print_peak_bytes"] < HOST_RSS_GOAL_BYTES and rss["cut"] and rss["goes_on"] else "OVER GOAL"
    m = measure()
    start_ok = "ok" if m["start_ratio"] <= START_GOAL else "OVER GOAL"
    turn_ok = "ok" if m["turn_ratio"] <= TURN_GOAL else "OVER GOAL"
    print(
        f"jail ({m['bwrap']}; whole-episode bound: {m['bounds']}):\n"
        f"  kernel start (launch, ready, boot)  jail {m['start_jail_s']:6.3f} s   bare ipykernel (ipc) "
        f"{m['start_bare_s']:6.3f} s   ratio {m['start_ratio']:.2f} (goal <= {START_GOAL}) {start_ok}\n"
        f"  `1+1` turn round-trip               jail {m['turn_jail_s'] * 1000:6.2f} ms  bare ipykernel (ipc) "
        f"{m['turn_bare_s'] * 1000:6.2f} ms  ratio {m['turn_ratio']:.2f} (goal <= {TURN_GOAL}) {turn_ok}\n"
        f"  host peak RSS, one episode process   {rss['mib']} MiB print {rss['print_peak_bytes'] / 2**20:6.0f} MiB   "
        f"trivial cell {rss['trivial_peak_bytes'] / 2**20:6.0f} MiB   output cut: {rss['cut']}, "
        f"episode goes on: {rss['goes_on']} (goal < {HOST_RSS_GOAL_BYTES / 2**30:g} GiB) {rss_ok}"
    )
    return {**m, "host_rss": rss}


if __name__ == "__main__":
    main()
