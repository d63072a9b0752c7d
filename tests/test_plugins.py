"""An outside package adds a task family, a model provider, a harness and an executor through the
`tsbench.plugins` entry-point group, with no edit to tsbench: the package here is written into a
temp dir as an installed distribution would be (a module and a `*.dist-info` folder holding
METADATA and entry_points.txt), put on PYTHONPATH, and used by `tsbench eval`, `describe` and
`memory build` in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from tsbench.core.registry import Registry, plugin_targets
from tsbench.testing import readiness

PLUGIN = textwrap.dedent('''
    """A tsbench plugin: the spike-count family, a model that always answers one count, a one-call
    harness and an executor that runs episodes one after another in this process."""
    import hashlib
    import json
    import re
    from pathlib import Path

    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tsbench.core.episode import EpisodeResult, EpisodeTask
    from tsbench.eval.episode import execute_job
    from tsbench.eval.executors import BaseExecutor
    from tsbench.models.base import Completion, Message
    from tsbench.tasks.base import Column, Sample, SampleRef, Scored, TaskFamily

    def write_dataset(folder, rows=3, seed=0, split="test"):
        rng = np.random.default_rng(seed)
        records = []
        for category, spikes in (("few", (1, 3)), ("many", (4, 6))):
            for index in range(rows):
                count = int(rng.integers(spikes[0], spikes[1] + 1))
                values = rng.normal(0.0, 0.05, 64)
                values[rng.choice(np.arange(4, 60, 6), size=count, replace=False)] += 1.0
                records.append({"id": f"{category}-{index}", "category": category, "length": 64,
                                "question": 'How many spikes? Answer {"count": <int>}.',
                                "gold": json.dumps({"count": count}), "values": values.tolist()})
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(records), folder / f"{split}.parquet")
        (folder / "manifest.json").write_text(json.dumps({"family": "spikes", "seed": seed, "split": split}))

    class Spikes(TaskFamily):
        name = "spikes"

        def resolve(self, data, *, seed, split, root, filters):
            return [Path(d) / f"{split}.parquet" if Path(d).is_dir() else Path(d) for d in data]

        def index(self, files, filters):
            return pd.concat([pq.read_table(f, columns=["id", "category", "length", "gold"]).to_pandas()
                              .assign(path=str(f)) for f in files], ignore_index=True)

        def load(self, ref):
            table = pq.read_table(ref.path).to_pandas()
            row = table[table["id"] == ref.id].iloc[0]
            task = EpisodeTask(row["id"], row["category"], "all", row["question"], ["x"],
                               np.asarray([row["values"]], dtype=np.float32))
            split = Path(ref.path).stem
            return Sample(ref, task, json.loads(row["gold"]), {"split": split, "length": 64, "n_channels": 1})

        def score(self, category, gold, message):
            found = re.findall(r'"count"\\s*:\\s*(-?\\d+)', message or "")
            if not found:
                return Scored(0.0, False, None, "no count")
            return Scored(float(int(found[-1]) == gold["count"]), True, {"count": int(found[-1])})

        def columns(self):
            return [Column("few", "Few", "acc", "Spikes"), Column("many", "Many", "acc", "Spikes")]

        def dataset_identity(self, files):
            digest = hashlib.sha256(b"".join(Path(f).read_bytes() for f in files)).hexdigest()
            return {"family": self.name, "seed": 0, "split": Path(files[0]).stem, "key": f"spikes/{digest[:12]}"}

    class CountModel:
        """`counter/<n>` answers {"count": n} to everything."""

        def __init__(self, count):
            self.name, self.count = f"counter/{count}", int(count)

        def generate(self, messages, *, max_tokens=None, temperature=None, task=None):
            return Completion(json.dumps({"count": self.count}), input_tokens=1, output_tokens=1)

        def close(self):
            pass

    def build_counter(name, options):
        return CountModel(name)

    def run_once(agent, task, cfg):
        """One call with the bare question; the reply is the final message."""
        result = EpisodeResult(attributes={"plugin_harness": "once"})
        completion = agent.generate([Message("user", task.question)])
        result.add_completion(completion)
        result.final_message = completion.text
        return result

    class InlineExecutor(BaseExecutor):
        """Every episode in turn, in this process."""

        def __init__(self, agents):
            self.agents = agents

        @classmethod
        def from_options(cls, options):
            return cls(options.agents)

        def run(self, jobs, on_record, on_interrupt=None):
            for job in jobs:
                for record in execute_job(job, self.agents):
                    on_record(dict(record, attributes={**dict(record.get("attributes") or {}), "executor": "inline"}))
''')

ENTRY_POINTS = """\
[tsbench.plugins]
family.spikes = tsb_spikes_plugin:Spikes
provider.counter = tsb_spikes_plugin:build_counter
harness.once = tsb_spikes_plugin:run_once
executor.inline = tsb_spikes_plugin:InlineExecutor
"""


def install(site: Path, name: str, modules: dict[str, str], entry_points: str) -> Path:
    """`modules` (module name -> source) written into `site` as the installed distribution `name`, with
    its entry points (no pip, no network)."""
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return site


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    """A site dir holding the plugin as an installed distribution."""
    return install(tmp_path_factory.mktemp("site"), "tsb-spikes-plugin", {"tsb_spikes_plugin": PLUGIN}, ENTRY_POINTS)


def tsbench(site: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    return readiness.run(
        [sys.executable, "-m", "tsbench.cli", *args], capture_output=True, text=True, env=env, check=False
    )


def test_a_plugin_family_provider_harness_and_executor_run_from_the_cli(plugin_path, tmp_path):
    sys.path.insert(0, str(plugin_path))
    try:
        from tsb_spikes_plugin import write_dataset
    finally:
        sys.path.remove(str(plugin_path))
    data = tmp_path / "spikes"
    write_dataset(data)
    out = tmp_path / "run"
    res = tsbench(
        plugin_path,
        "eval",
        "--family",
        "spikes",
        "--model",
        "counter/2",
        "--harness",
        "once",
        "--executor",
        "inline",
        "--data",
        str(data),
        "--out",
        str(out),
    )
    assert res.returncode == 0, res.stderr[-2000:]
    samples = pd.read_parquet(out / "samples.parquet").sort_values("id")
    gold = pd.read_parquet(data / "test.parquet").sort_values("id")
    assert len(samples) == 6 and samples["error_type"].isna().all()
    assert (samples["family"] == "spikes").all() and (samples["harness"] == "once").all()
    assert list(samples["score"]) == [float(json.loads(g)["count"] == 2) for g in gold["gold"]]
    attributes = [dict(a) for a in samples["attributes"]]
    assert all(a.get("executor") == "inline" and a.get("plugin_harness") == "once" for a in attributes)

    described = tsbench(plugin_path, "describe", str(data))  # the family named by the data's manifest
    assert described.returncode == 0, described.stderr[-2000:]
    assert "test.parquet: 6" in described.stdout and "│ few      │ 3    │" in described.stdout
    bank = tmp_path / "bank.parquet"
    built = tsbench(
        plugin_path, "memory", "build", str(out), "--out", str(bank), "--embedder", "none", "--include-test-split"
    )
    assert built.returncode == 0, built.stderr[-2000:]
    assert sorted(pd.read_parquet(bank)["id"]) == sorted(samples["id"])  # every finished episode (TimeClaw's rule)


def test_unknown_names_list_the_plugins_beside_the_built_ins(plugin_path, tmp_path):
    res = tsbench(plugin_path, "eval", "--family", "spikez", "--model", "counter/2", "--data", str(tmp_path))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert "unknown task family 'spikez'" in res.stderr + res.stdout and "spikes" in res.stderr + res.stdout


def test_a_built_in_name_wins_over_a_plugin_and_bad_names_are_user_errors(plugin_path):
    sys.path.insert(0, str(plugin_path))
    plugin_targets.cache_clear()
    try:
        registry = Registry("harness", {"once": "tsbench.harness.rlm:run_rlm"})
        assert registry.names() == ["once"] and registry["once"].module == "tsbench.harness.rlm"
        assert Registry("executor", {}).names() == ["inline"]
    finally:
        sys.path.remove(str(plugin_path))
        plugin_targets.cache_clear()
    registry = Registry("harness", {"rlm": "tsbench.harness.rlm:run_rlm"})
    with pytest.raises(ValueError, match="unknown harness 'nope'; choose from rlm"):
        registry.load("nope")
    broken = Registry("family", {"gone": "tsbench.no_such_module:Thing"}, direct=True)
    with pytest.raises(ValueError, match="cannot load task family 'gone'"):
        broken.load("gone")
    assert broken.target("pkg.mod:Attr").attribute == "Attr"  # direct: module:attribute is a name too
