"""The jail's cost, each beside its floor, measured side by side in one run: kernel start (launch,
ready, boot: numpy, scipy and the series loaded) and the `1+1` turn round-trip, jailed
(`Sandbox`) vs a bare ipykernel on the same transport (ipc) running the same boot. Starts alternate
jail / bare; turns alternate one jailed and one bare `1+1` on two live kernels, so machine load
hits both alike. Goals (issue 12): start <= 1.3x, turn <= 1.5x.

An RLM episode of `scripted/zscore` (issue 26) on a real AnomalyXL row at L = 131,072 (one channel, and
16 channels), started cold vs from the pool of pre-started jails (harness/runtime/pool.py), alternating
cold / pooled. Before every episode of either side the pool is full and idle; the refill a claim starts
runs beside the pooled episode, as it does in a run. Goal: pooled <= 0.5x cold.

Also the host's memory under hostile output (issue 29): the peak RSS of a fresh host process that runs one
sandbox and one cell printing 900 MiB in one message, beside the same for a trivial cell; and (issue 37) of one
that runs a cell sending 1, 60 and 200 pre-packed messages just under the 32 MiB cap, each signed as the
kernel's own (without the byte budgets, 60 took the host to 1.5 GiB, growing ~25 MiB a message). Goal: < 1 GiB."""

from __future__ import annotations

import subprocess
import time

import numpy as np

from tsbench.bench.common import Ratio, interleaved, load_average, measure_in_child, spread, verdict
from tsbench.harness.runtime.bare import BareKernel
from tsbench.harness.runtime.jail import check_jail
from tsbench.harness.runtime.message_bound import CELL_OUTPUT_BYTES
from tsbench.harness.runtime.sandbox import Sandbox

START_GOAL, TURN_GOAL = 1.3, 1.5
POOLED_EPISODE_GOAL = 0.5
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
    return {
        "start": Ratio(
            "kernel start (launch, ready, boot) jail / bare ipykernel (ipc)", jail_starts, bare_starts, START_GOAL
        ),
        "turn": Ratio("`1+1` turn round-trip jail / bare ipykernel (ipc)", jail_turns, bare_turns, TURN_GOAL),
        "start_jail": jail_starts,
        "start_bare": bare_starts,
        "turn_jail": jail_turns,
        "turn_bare": bare_turns,
        "bounds": bounds,
        "bwrap": _bwrap_version(),
    }


def _zscore_task(category: str, length: int):
    """A real AnomalyXL row (planned and materialised, nothing on disk) as an episode's input."""
    from tsbench.harness import EpisodeTask
    from tsbench.tasks.anomalyxl.config import preset
    from tsbench.tasks.anomalyxl.rowplan import materialize, plan_row

    row = plan_row(preset("paper"), "bench", category, length, 0)
    values = materialize(row.plan)
    return EpisodeTask(row.id, category, "precise", row.question, list(row.channel_names), values, list(row.options))


def measure_pooled_episodes(category: str, length: int, rounds: int = 3) -> dict:
    """Seconds of whole RLM episodes of scripted/zscore, cold vs from a pool, interleaved."""
    from tsbench.baselines import build_policy
    from tsbench.harness.rlm import RLMSettings, run_rlm
    from tsbench.harness.runtime.pool import JailPool, use_pool

    task, cfg = _zscore_task(category, length), RLMSettings()
    with JailPool(1) as pool:

        def episode(pooled: bool) -> float:
            if not pool.wait_ready(180):
                raise RuntimeError("the jail pool did not fill")
            policy = build_policy("scripted/zscore")
            began = time.perf_counter()
            if pooled:
                with use_pool(pool):
                    run_rlm(policy, task, cfg, image=False)
            else:
                run_rlm(policy, task, cfg, image=False)
            return time.perf_counter() - began

        episode(False)  # warm the host side (imports, the policy) before the clock matters
        samples = interleaved({"pooled": lambda: episode(True), "cold": lambda: episode(False)}, rounds)
        warm = pool.stats["warm"]
    channels = task.values.shape[0]
    label = f"RLM episode scripted/zscore {category} {channels} x {length} pooled / cold"
    return {
        "ratio": Ratio(label, samples["pooled"], samples["cold"], POOLED_EPISODE_GOAL),
        "warm_claims": warm,
        **samples,
    }


def _peaks_around(code: str, timeout_s: float) -> dict:
    """In this process (run it in a fresh one): peak RSS before and after one cell running `code`, whether
    the observation says the output was cut, whether the episode goes on, and what the cell returned."""
    import resource

    def peak() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    with Sandbox({}, cell_timeout_s=timeout_s) as box:
        box.run("1+1")
        before = peak()
        cell = box.run(code)
        after = peak()
        goes_on = box.run("6 * 7").result_repr == "42"
    seen = {"peak_before_bytes": before, "peak_after_bytes": after, "cut": "output cut" in cell.stdout}
    return {**seen, "goes_on": goes_on, "seconds": cell.seconds, "result": cell.result_repr}


def host_rss_for_print(mib: int) -> dict:
    """`_peaks_around` one cell that prints `mib` MiB in one message."""
    seen = _peaks_around(f"print('x' * ({int(mib)} * 2**20))" if mib else "print('x')", 120)
    del seen["result"]
    return {**seen, "growth_bytes": seen["peak_after_bytes"] - seen["peak_before_bytes"]}


# A cell that signs `count` stream messages of `mib` MiB ahead (distinct headers, one shared body), then sends
# them as fast as the kernel can: what a hostile kernel does to fill the host's queues.
_PACKED_FLOOD = """
from jupyter_client.session import DELIM
kernel = get_ipython().kernel
session = kernel.session
parent = session.pack(kernel.get_parent('shell')['header'])
content = session.pack({{'name': 'stdout', 'text': 'x' * ({mib} * 2**20 - 4096)}})
packed = []
for _ in range({count}):
    parts = [session.pack(session.msg_header('stream')), parent, b'{{}}', content]
    packed.append([b'stream.stdout', DELIM, session.sign(parts)] + parts)
for frames in packed:
    kernel.iopub_socket.send_multipart(frames)
'sent'
"""


def packed_flood_code(count: int, mib: int) -> str:
    return _PACKED_FLOOD.format(count=int(count), mib=int(mib))


def host_rss_for_messages(count: int, mib: int | None = None) -> dict:
    """`_peaks_around` one cell that sends `count` pre-packed messages of `mib` MiB (default: 1 MiB under
    the per-message cap)."""
    from tsbench.harness.runtime.message_bound import MAX_MESSAGE_BYTES

    mib = MAX_MESSAGE_BYTES // 2**20 - 1 if mib is None else mib
    seen = _peaks_around(packed_flood_code(count, mib), 300)
    sent = seen.pop("result") == "'sent'"
    return {"count": count, "mib": mib, **seen, "sent": sent}


def measure_host_rss_messages(counts: tuple[int, ...] = (1, 60, 200)) -> list[dict]:
    """Peak RSS of a fresh host process per message count."""
    return [measure_in_child(host_rss_for_messages, count)[2] for count in counts]


def measure_host_rss(mib: int = 900) -> dict:
    """Peak RSS of a fresh host process for a trivial cell and for a `mib` MiB print."""
    _, trivial_peak, _ = measure_in_child(host_rss_for_print, 0)
    _, big_peak, big = measure_in_child(host_rss_for_print, mib)
    return {"mib": mib, "trivial_peak_bytes": trivial_peak, "print_peak_bytes": big_peak, **big}


def main() -> dict:
    rss = measure_host_rss()
    rss_ok = verdict(rss["print_peak_bytes"] < HOST_RSS_GOAL_BYTES and rss["cut"] and rss["goes_on"])
    floods = measure_host_rss_messages()
    m = measure()
    from tsbench.tasks.anomalyxl import labels

    episodes = [
        measure_pooled_episodes(labels.LOCALIZE, 131072),
        measure_pooled_episodes(labels.ALL_CHANNELS, 131072),
    ]
    lines = [
        f"jail ({m['bwrap']}; whole-episode bound: {m['bounds']}; {load_average()}):",
        f"  kernel start: jail {spread(m['start_jail'])}; bare {spread(m['start_bare'])}",
        f"  {m['start'].line()}",
        f"  `1+1` turn: jail {spread(m['turn_jail'], 1000, 'ms')}; bare {spread(m['turn_bare'], 1000, 'ms')}",
        f"  {m['turn'].line()}",
    ]
    for e in episodes:
        lines += [f"  RLM episode: pooled {spread(e['pooled'])}; cold {spread(e['cold'])}", f"  {e['ratio'].line()}"]
    lines.append(
        f"  host peak RSS, one episode process: {rss['mib']} MiB print {rss['print_peak_bytes'] / 2**20:.0f} MiB, "
        f"trivial cell {rss['trivial_peak_bytes'] / 2**20:.0f} MiB, output cut: {rss['cut']}, episode goes on: "
        f"{rss['goes_on']} (goal < {HOST_RSS_GOAL_BYTES / 2**30:g} GiB): {rss_ok}"
    )
    for flood in floods:
        ok = flood["peak_after_bytes"] < HOST_RSS_GOAL_BYTES and flood["goes_on"] and flood["sent"]
        ok = ok and (flood["cut"] or flood["count"] * flood["mib"] * 2**20 <= CELL_OUTPUT_BYTES)
        lines.append(
            f"  host peak RSS, one episode process, a cell sending {flood['count']} pre-packed {flood['mib']} MiB "
            f"message(s): {flood['peak_after_bytes'] / 2**20:.0f} MiB (+"
            f"{(flood['peak_after_bytes'] - flood['peak_before_bytes']) / 2**20:.0f} MiB over the peak before the cell; "
            f"cell {flood['seconds']:.1f} s), output cut: {flood['cut']}, "
            f"episode goes on: {flood['goes_on']} (goal < {HOST_RSS_GOAL_BYTES / 2**30:g} GiB): {verdict(ok)}"
        )
    print("\n".join(lines))
    return {
        "start": m["start"].as_dict(),
        "turn": m["turn"].as_dict(),
        "episodes": [e["ratio"].as_dict() for e in episodes],
        "host_rss": rss,
        "host_rss_messages": floods,
    }


if __name__ == "__main__":
    main()
