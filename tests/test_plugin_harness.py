"""A plugin harness is a harness like the built-ins (issue 39): an outside package declares a `Harness`
subclass with its own settings section and the kernel capability, and tsbench treats it as it treats
rlm: its section is a flag and a TOML table, its settings reach it and refuse other harnesses, its
kernels run in the jail from a pre-started pool, eval refuses to start where the jail cannot, and a
Ray worker that cannot jail refuses its episodes; `tsbench train-grpo` plays it in its rollouts as
eval does. Run through `tsbench eval` and `train-grpo` in subprocesses with the plugin installed as a
distribution (a module and a *.dist-info folder), as test_plugins does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from test_plugins import ENTRY_POINTS as SPIKES_ENTRY_POINTS
from test_plugins import PLUGIN, install
from test_train_check import DRIVER as CLI_DRIVER
from tsbench.testing import readiness

KERNEL_PLUGIN = textwrap.dedent('''
    """A plugin harness: one cell in the jailed kernel, then one model call that reads its output."""
    from dataclasses import dataclass
    from typing import ClassVar

    from tsbench.core.episode import EpisodeResult
    from tsbench.core.settings import setting
    from tsbench.harness import Harness, HarnessSettings
    from tsbench.harness.runtime.pool import active_pool
    from tsbench.harness.runtime.sandbox import Sandbox
    from tsbench.models.base import Message


    @dataclass
    class PeekSettings(HarnessSettings):
        """[peek]: the peek harness's own settings."""

        SECTION: ClassVar[str] = "peek"

        greeting: str = setting("hello", "What the kernel prints before the series' sum.")


    class Peek(Harness[PeekSettings]):
        kernel = True

        def run(self, agent, task, cfg):
            pooled = active_pool() is not None  # the executor pre-started jails for this run
            with Sandbox(task.series, cell_timeout_s=cfg.cell_timeout_s, unsafe=cfg.unsafe_sandbox) as box:
                cell = box.run(f"print({cfg.greeting!r}, round(float(sum(v.sum() for v in series.values())), 3))")
            completion = agent.generate([Message("user", task.question + "\\n" + cell.stdout)])
            result = EpisodeResult(attributes={"kernel_said": cell.stdout.strip(), "pooled": str(pooled)})
            result.add_completion(completion)
            result.final_message = completion.text
            result.code_cells = 1
            return result
''')

ENTRY_POINTS = SPIKES_ENTRY_POINTS + "harness.peek = tsb_peek_plugin:Peek\n"  # test_plugins' package, and peek


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    modules = {"tsb_spikes_plugin": PLUGIN, "tsb_peek_plugin": KERNEL_PLUGIN}
    site = install(tmp_path_factory.mktemp("site"), "tsb-peek-plugin", modules, ENTRY_POINTS)
    sys.path.insert(0, str(site))
    try:
        from tsb_spikes_plugin import write_dataset
    finally:
        sys.path.remove(str(site))
    write_dataset(site / "data", rows=1, seed=1, split="train")  # what train-grpo draws (rows apart from test's)
    write_dataset(site / "data", rows=2)
    return site


def _run(site: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    if path is not None:
        env["PATH"] = path
    return readiness.run([sys.executable, *args], capture_output=True, text=True, env=env, check=False)


def _eval(site: Path, out: Path, *extra: str, path: str | None = None) -> subprocess.CompletedProcess:
    args = ["-m", "tsbench.cli", "eval", "--family", "spikes", "--model", "counter/2", "--data", str(site / "data")]
    return _run(site, *args, "--out", str(out), *extra, path=path)


def test_a_plugin_harness_with_its_own_section_runs_jailed_and_pooled_through_eval(site, tmp_path):
    helped = _run(site, "-m", "tsbench.cli", "eval", "--harness", "peek", "--help")
    assert helped.returncode == 0, helped.stderr[-2000:]
    text = " ".join(helped.stdout.split())
    assert "--greeting" in text and "What the kernel prints before the series' sum. [default: hello]" in text

    config = tmp_path / "peek.toml"
    config.write_text('[eval]\nharness = "peek"\nconcurrency = 2\n\n[eval.peek]\ngreeting = "from-toml"\n')
    done = _eval(site, tmp_path / "toml", "--config", str(config))
    assert done.returncode == 0, done.stderr[-3000:]
    done = _eval(site, tmp_path / "flag", "--harness", "peek", "--greeting", "from-flag", "--concurrency", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    for name, greeting in (("toml", "from-toml"), ("flag", "from-flag")):
        samples = pd.read_parquet(tmp_path / name / "samples.parquet")
        assert len(samples) == 4 and samples["error_type"].isna().all() and (samples["harness"] == "peek").all()
        for attributes, code_cells in zip(samples["attributes"], samples["code_cells"]):
            said, pooled = dict(attributes)["kernel_said"].split(), dict(attributes)["pooled"]
            assert said[0] == greeting and float(said[1]) > 0 and pooled == "True" and code_cells == 1
        run = json.loads((tmp_path / name / "run.json").read_text())
        assert run["harness_capabilities"]["kernel"] is True and run["unsafe_sandbox"] is False
        assert run["settings"]["greeting"] == greeting

    refused = _eval(site, tmp_path / "refused", "--harness", "once", "--greeting", "x")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr[-2000:]
    assert "greeting (--greeting) is a setting of [peek], which harness once does not have" in refused.stderr
    refused = _eval(site, tmp_path / "refused", "--harness", "peek", "--depth", "1")
    assert refused.returncode == 2 and "depth (--depth) is a setting of [rlm]" in refused.stderr
    assert not (tmp_path / "refused").exists()


def test_eval_refuses_a_plugin_kernel_harness_where_the_jail_cannot_start(site, tmp_path):
    bin_dir = tmp_path / "bin"  # the tools the unsafe mode uses, and no bwrap
    bin_dir.mkdir()
    for tool in ("unshare", "setpriv", "nsenter", "sh", "true", "env"):
        if found := shutil.which(tool):
            (bin_dir / tool).symlink_to(found)
    refused = _eval(site, tmp_path / "nojail", "--harness", "peek", path=str(bin_dir))
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: cannot start the jail"), lines
    assert not (tmp_path / "nojail").exists()
    plain = _eval(site, tmp_path / "plain", "--harness", "once", path=str(bin_dir))  # no kernel: no jail needed
    assert plain.returncode == 0, plain.stderr[-2000:]


CHECKS = """
import json
from tsbench.core.config import build
from tsbench.eval.config import EvalConfig
from tsbench.eval.episode import EpisodeJob
from tsbench.eval.executors.ray import jail_refusal
from tsbench.eval.runner import _play, jails_to_pool
from tsbench.harness import HarnessSettings
from tsbench.tasks.base import SampleRef
from tsb_peek_plugin import PeekSettings

ref = SampleRef("spikes", "test.parquet", "few-0")
job = lambda harness, settings: EpisodeJob(ref, 0, "counter/2", harness, settings)
cfg = lambda harness, **more: build(EvalConfig, {"model": "counter/2", "harness": harness, **more})
print(json.dumps({
    "ray_peek": jail_refusal(job("peek", PeekSettings()), "node-1", "bubblewrap is missing"),
    "ray_rlm": jail_refusal(job("rlm", HarnessSettings()), "node-1", "bubblewrap is missing"),
    "ray_once": jail_refusal(job("once", HarnessSettings()), "node-1", "bubblewrap is missing"),
    "ray_unsafe": jail_refusal(job("peek", PeekSettings(unsafe_sandbox=True)), "node-1", "bubblewrap is missing"),
    "ray_jailed": jail_refusal(job("peek", PeekSettings()), "node-1", None),
    "pool_peek": jails_to_pool(cfg("peek", concurrency=3), _play(cfg("peek"), "peek"), 10),
    "pool_few": jails_to_pool(cfg("peek", concurrency=3), _play(cfg("peek"), "peek"), 2),
    "pool_once": jails_to_pool(cfg("once", concurrency=3), _play(cfg("once"), "once"), 10),
    "settings": repr(_play(cfg("peek", greeting="hi"), "peek").settings),
}))
"""


def test_a_ray_worker_without_a_jail_refuses_plugin_kernel_episodes_and_the_pool_counts_them(site):
    done = _run(site, "-c", CHECKS)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["ray_peek"] == found["ray_rlm"] == "Ray worker on node-1: bubblewrap is missing"
    assert found["ray_once"] is None and found["ray_unsafe"] is None and found["ray_jailed"] is None
    assert (found["pool_peek"], found["pool_few"], found["pool_once"]) == (3, 2, 0)
    assert found["settings"].startswith("PeekSettings(") and "greeting='hi'" in found["settings"]


def test_train_grpo_plays_a_plugin_kernel_harness_with_its_own_section_for_one_cpu_step(site, tmp_path):
    """One GRPO step of a tiny random Llama on the plugin family's train split, its episodes played by
    the plugin's kernel harness in the jail with [grpo.peek] from the TOML; --check shows what the
    harness declares, and a setting of another harness's section is refused before anything loads."""
    from tsbench.testing.tiny import make_small_vocab_llama

    model = make_small_vocab_llama(tmp_path / "tiny", words=("count", "1", "2", "3", "4", "5", "6"))
    config = tmp_path / "peek.toml"
    config.write_text(
        f'[grpo]\nmodel = "local/{model}"\nfamily = "spikes"\ndata = ["{site / "data"}"]\nharness = "peek"\n'
        "max_steps = 1\ngroup_size = 2\nbatch_size = 2\nmicro_batch_size = 2\nrollout_workers = 2\n"
        "max_turns = 1\nmax_tokens = 4\nmax_seq_len = 256\ngradient_checkpointing = false\n"
        f'out = "{tmp_path / "run"}"\n\n[grpo.peek]\ngreeting = "from-toml"\n'
    )
    trained = _run(site, "-m", "tsbench.cli", "train-grpo", "--config", str(config))
    assert trained.returncode == 0, trained.stderr[-3000:]
    print(next(line for line in trained.stderr.splitlines() if line.startswith("step 1/1")))
    run = tmp_path / "run"
    assert pd.read_parquet(run / "metrics.parquet")["step"].tolist() == [1]
    rollouts = pd.read_json(run / "rollouts" / "samples.jsonl", lines=True)
    train_ids = set(pd.read_parquet(site / "data" / "train.parquet")["id"])
    assert len(rollouts) == 2 and set(rollouts["id"]) <= train_ids and (rollouts["split"] == "train").all()
    assert (rollouts["harness"] == "peek").all() and rollouts["error_type"].isna().all()
    for attributes, code_cells in zip(rollouts["attributes"], rollouts["code_cells"]):
        said = attributes["kernel_said"].split()  # printed by the cell the plugin ran in the kernel
        assert said[0] == "from-toml" and float(said[1]) > 0 and code_cells == 1
    harness_config = json.loads((run / "train.json").read_text())["config"]["harness_config"]
    assert harness_config["greeting"] == "from-toml" and harness_config["unsafe_sandbox"] is False

    refused = tmp_path / "refused.toml"
    refused.write_text(config.read_text().replace("[grpo.peek]", "[grpo.rlm]\ndepth = 1\n\n[grpo.peek]"))
    commands = [["train-grpo", "--config", str(config), "--check"], ["train-grpo", "--config", str(refused)]]
    done = _run(site, "-c", CLI_DRIVER, json.dumps(commands))
    assert done.returncode == 0, done.stderr[-3000:]
    checked, refusal = json.loads(done.stdout.strip().splitlines()[-1])
    print(checked["out"])
    assert checked["code"] == 0, checked["err"]
    assert "harness    peek:" in checked["out"] and "declares kernel (in the jail)" in checked["out"]
    assert "[peek] greeting='from-toml'" in checked["out"]
    assert refusal["code"] == 2 and len(refusal["err"].strip().splitlines()) == 1, refusal["err"]
    assert "depth (--depth) is a setting of [rlm], which harness peek does not have" in refusal["err"]
