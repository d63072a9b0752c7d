"""Eval overheads, each beside its floor: kernel start, per-turn RLM overhead vs a bare jupyter_client
round-trip, and rows/s at concurrency 8 vs 1 against a loopback server with a fixed 200 ms latency."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from tsbench.baselines.scripted import TrivialCodePolicy
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.harness import EpisodeTask, HarnessConfig
from tsbench.harness.rlm import run_rlm
from tsbench.harness.runtime.sandbox import Sandbox, bare_roundtrip_seconds
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split
from tsbench.testing.fake_openai_server import FakeOpenAIServer


def kernel_start_seconds(repeats: int = 3) -> float:
    series = {f"ch_{i:02d}": np.random.default_rng(i).standard_normal(131072) for i in range(16)}
    timings = []
    for _ in range(repeats):
        began = time.perf_counter()
        with Sandbox(series):
            timings.append(time.perf_counter() - began)
    return statistics.median(timings)


def rlm_turn_overhead_seconds(turns: int = 60) -> float:
    """Per-turn time of the whole RLM loop (policy, sandbox round-trip, observation) on `1+1`:
    an episode of `turns` code turns minus one of a single turn, so the kernel start cancels out."""
    values = np.random.default_rng(0).standard_normal((1, 16384)).astype(np.float32)
    task = EpisodeTask("bench", "localize", "precise", "Is there an anomaly?", ["ch_00"], values)

    def episode(n: int) -> float:
        began = time.perf_counter()
        run_rlm(TrivialCodePolicy(), task, HarnessConfig(max_turns=n + 1), image=False)
        return time.perf_counter() - began

    short = statistics.median(episode(1) for _ in range(3))
    return (episode(turns + 1) - short) / turns


def rows_per_second(data_dir: Path, concurrency: int, latency_s: float = 0.2, limit: int | None = None) -> float:
    """Rows/s of a whole eval run against a loopback server that answers after `latency_s`."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer(default='ok:{"answer": "Yes"}', latency_s=latency_s) as server,
    ):
        cfg = EvalConfig(
            model="openai/fake-model",
            harness="single-pass-text",
            data=[str(data_dir)],
            regime="both",
            concurrency=concurrency,
            base_url=server.base_url,
            max_attempts=1,
            limit=limit,
            out=str(Path(tmp) / "run"),
        )
        began = time.perf_counter()
        run_eval(cfg)
        elapsed = time.perf_counter() - began
        return server.request_count / elapsed


def main() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = preset("small")
        generate_split(cfg, "test", tmp)
        data_dir = Path(tmp) / "seed42"
        start = kernel_start_seconds()
        bare = bare_roundtrip_seconds()
        turn = rlm_turn_overhead_seconds()
        rows_per_second(data_dir, 1, latency_s=0.0, limit=1)  # warm-up: the first run pays the client's imports
        r1 = rows_per_second(data_dir, 1)
        r8 = rows_per_second(data_dir, 8)
    print(
        "eval:\n"
        f"  sandbox kernel start (16 x 131072 series loaded)  {start:6.2f} s\n"
        f"  RLM turn with `1+1` {turn * 1000:7.1f} ms  vs bare ipykernel (ipc) execute {bare * 1000:6.1f} ms  "
        f"ratio {turn / bare:.2f} (goal <= 1.5)\n"
        f"  rows/s against a 200 ms loopback server: concurrency 1 {r1:5.2f}, concurrency 8 {r8:5.2f}  "
        f"ratio {r8 / r1:.2f} (goal >= 6)"
    )
    return {"kernel_start_s": start, "turn_s": turn, "bare_s": bare, "rows_s_1": r1, "rows_s_8": r8}
