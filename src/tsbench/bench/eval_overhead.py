"""Eval overheads, each beside its floor, every ratio measured interleaved.

* the whole RLM loop's per-turn cost on `1+1` (sandbox round-trip, output capture, observation,
  transcript) vs a bare jupyter_client execute on the same transport, alternating turn by turn; goal <= 1.5x;
* rows/s at concurrency 8 vs 1 against a loopback server that answers after 200 ms, on >= 200 rows
  (the small test split, 5 epochs), runs alternating 1, 8, 8, 1, ...; only the executor's run is
  timed (row selection, run directory and the summary are outside the window). Goal >= 6.5x.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from tsbench.baselines.scripted import TrivialCodePolicy
from tsbench.bench.common import Ratio, interleaved, load_average, spread
from tsbench.eval.config import EvalConfig
from tsbench.eval.executors.threads import ThreadExecutor
from tsbench.eval.runner import run_eval
from tsbench.harness import EpisodeTask
from tsbench.harness.rlm import RLMSettings, run_rlm
from tsbench.harness.runtime.bare import BareKernel
from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import generate_split
from tsbench.testing.fake_openai_server import FakeOpenAIServer

TURN_GOAL, SCALING_GOAL = 1.5, 6.5
EPOCHS = 5  # 44 rows of the small test split x 5 = 220 episodes per run
ROUNDS = 2


class _PairedTurnPolicy:
    """`scripted/trivial-code` (`1+1` every turn) that also times the floor beside each turn: every call
    records the seconds since its previous return (one whole RLM turn: code extraction, the sandbox's
    round-trip and output capture, observation, transcript, caps; the policy's own time is ~0), then runs
    one bare execute of `1+1` and records that. Turns and bare executes thus alternate one by one."""

    name = "scripted/trivial-code"

    def __init__(self, bare: BareKernel) -> None:
        self.bare, self.inner = bare, TrivialCodePolicy()
        self.turns: list[float] = []
        self.bares: list[float] = []
        self._returned: float | None = None

    def generate(self, messages, **kwargs):
        now = time.perf_counter()
        if self._returned is not None:
            self.turns.append(now - self._returned)
        self.bares.append(self.bare.roundtrip_seconds("1+1"))
        completion = self.inner.generate(messages, **kwargs)
        self._returned = time.perf_counter()
        return completion

    def close(self) -> None:
        pass


def rlm_turn_samples(rounds: int = 3, turns: int = 60) -> dict[str, list[float]]:
    """Per round (one RLM episode of `turns` code turns), the median seconds of an RLM turn on `1+1` and
    of a bare ipykernel execute of `1+1`, the two alternating turn by turn (see _PairedTurnPolicy). An
    earlier version took (episode(61) - episode(1)) / 60: the kernel start's jitter and a mean of turns
    (against the floor's median) made it read 1.9-2.7x while the turn itself costs ~1.05x."""
    values = np.random.default_rng(0).standard_normal((1, 16384)).astype(np.float32)
    task = EpisodeTask("bench", "localize", "precise", "Is there an anomaly?", ["ch_00"], values)
    samples: dict[str, list[float]] = {"rlm": [], "bare": []}
    with BareKernel() as bare:
        for _ in range(5):
            bare.run("1+1")
        for _ in range(rounds):
            policy = _PairedTurnPolicy(bare)
            run_rlm(policy, task, RLMSettings(max_turns=turns + 2), image=False)
            samples["rlm"].append(statistics.median(policy.turns[1:]))  # the first follows the kernel start
            samples["bare"].append(statistics.median(policy.bares[1:]))
    return samples


@contextlib.contextmanager
def _timed_executor_runs(seconds: list[float]):
    """Record how long each ThreadExecutor.run takes (the episodes only), restored afterwards."""
    original = ThreadExecutor.run

    def run(self, *args, **kwargs):
        began = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - began)

    ThreadExecutor.run = run
    try:
        yield
    finally:
        ThreadExecutor.run = original


def rows_per_second(
    data_dir: Path, concurrency: int, latency_s: float = 0.2, epochs: int = EPOCHS
) -> tuple[float, int]:
    """(rows/s of the executor's run, rows) of a whole eval against a loopback server answering after `latency_s`."""
    window: list[float] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer(default='ok:{"answer": "Yes"}', latency_s=latency_s) as server,
        _timed_executor_runs(window),
    ):
        cfg = EvalConfig(
            model="openai/fake-model",
            harness="single-pass-text",
            data=[str(data_dir)],
            regime="both",
            epochs=epochs,
            concurrency=concurrency,
            base_url=server.base_url,
            max_attempts=1,
            out=str(Path(tmp) / "run"),
        )
        run_eval(cfg)
        rows = server.request_count
    return rows / window[0], rows


def main() -> dict:
    turns = rlm_turn_samples()
    turn = Ratio("RLM turn with `1+1` / bare ipykernel (ipc) execute", turns["rlm"], turns["bare"], TURN_GOAL)
    counted: dict[int, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        generate_split(preset("small"), "test", tmp)
        data_dir = Path(tmp) / "seed42"
        rows_per_second(data_dir, 1, latency_s=0.0, epochs=1)  # warm-up: the first run pays the client's imports

        def side(concurrency: int):
            def seconds_per_row() -> float:
                rate, counted[concurrency] = rows_per_second(data_dir, concurrency)
                return 1.0 / rate

            return seconds_per_row

        runs = interleaved({1: side(1), 8: side(8)}, ROUNDS)
    # rows/s ratio c8 / c1 = (seconds per row at c1) / (seconds per row at c8)
    scaling = Ratio("rows/s concurrency 8 / concurrency 1 (200 ms loopback)", runs[1], runs[8], SCALING_GOAL, False)
    r1 = [1 / s for s in runs[1]]
    r8 = [1 / s for s in runs[8]]
    print(
        f"eval ({load_average()}):\n"
        f"  RLM turn {spread(turns['rlm'], 1000, 'ms')}; bare execute {spread(turns['bare'], 1000, 'ms')}\n"
        f"  {turn.line()}\n"
        f"  rows/s over {counted[1]} rows: concurrency 1 median {statistics.median(r1):.2f} (max {max(r1):.2f}), "
        f"concurrency 8 median {statistics.median(r8):.2f} (max {max(r8):.2f}); executor's run only\n"
        f"  {scaling.line()}"
    )
    return {"turn": turn.as_dict(), "scaling": scaling.as_dict(), "rows": counted[1], "rows_s_1": r1, "rows_s_8": r8}
