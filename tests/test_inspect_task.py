"""AnomalyXL inside inspect_ai: our harness as the solver, our scorer, inspect's mock model as the agent."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.testing import readiness

inspect_ai = pytest.importorskip("inspect_ai")
ROOT = Path(__file__).resolve().parents[1]

# A mock agent: under the rlm harness (a kernel to write code for) its first reply is code, and every
# other reply is the answer. Usage is given, so the mock never counts tokens itself (that would fetch
# a tokenizer file).
REPLY = """
from inspect_ai.model import ModelOutput, ModelUsage

def reply(messages, tools, tool_choice, config):
    kernel = "Jupyter kernel" in messages[0].text
    first = not any(m.role == "assistant" for m in messages)
    text = "```python\\nprint('length', L, channels)\\n```" if kernel and first else '{"answer": "Yes"}'
    output = ModelOutput.from_content("mockllm/model", text)
    output.usage = ModelUsage(input_tokens=100, output_tokens=10, total_tokens=110)
    return output
"""


def _reply():
    scope: dict = {}
    exec(REPLY, scope)
    return scope["reply"]


def test_rlm_through_our_harness_scored_by_our_scorer(small_data, tmp_path):
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from tsbench.interop.inspect_task import anomalyxl

    task = anomalyxl(data=str(small_data), regime="coarse", categories=lb.PRESENCE, limit=1, harness="rlm")
    [log] = inspect_eval(
        task, model=get_model("mockllm/model", custom_outputs=_reply()), log_dir=str(tmp_path), display="none"
    )
    assert log.status == "success", log.error
    [sample] = log.samples
    gold = json.loads(sample.target)["answer"]
    assert sample.scores["tsbench_score"].value == (1.0 if gold == "Yes" else 0.0)
    assert sample.scores["tsbench_score"].metadata["valid"] is True
    roles = [m.role for m in sample.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    assert "length 1024" in sample.messages[3].text or "length 2048" in sample.messages[3].text  # the real kernel ran
    assert sample.metadata["tsbench"]["code_cells"] == 1 and sample.metadata["tsbench"]["turns"] == 2
    assert sample.model_usage["mockllm/model"].input_tokens == 200  # inspect counted both calls
    metrics = log.results.scores[0].metrics
    assert metrics["mean"].value == sample.scores["tsbench_score"].value and lb.PRESENCE in metrics


def test_inspect_finds_the_task_by_name_through_the_entry_point(small_data, tmp_path):
    """`inspect eval tsbench/anomalyxl` resolves the name through the inspect_ai entry point that
    pyproject.toml declares; a throwaway dist-info on the path declares the same one here, as an
    install would."""
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["inspect_ai"]
    dist = tmp_path / "site" / "tsbench_entry_point_check-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tsbench-entry-point-check\nVersion: 0\n")
    (dist / "entry_points.txt").write_text("[inspect_ai]\n" + "".join(f"{k} = {v}\n" for k, v in entry.items()))
    script = REPLY + textwrap.dedent(f"""
        import json
        from inspect_ai import eval
        from inspect_ai.model import get_model
        [log] = eval("tsbench/anomalyxl", model=get_model("mockllm/model", custom_outputs=reply),
                     task_args={{"data": {str(small_data)!r}, "regime": "coarse", "categories": "presence", "limit": 1}},
                     log_dir={str(tmp_path / "logs")!r}, display="none")
        print(json.dumps({{"status": log.status, "task": log.eval.task, "n": len(log.samples),
                          "scores": [s.scores["tsbench_score"].value for s in log.samples],
                          "gold": [json.loads(s.target)["answer"] for s in log.samples],
                          "roles": [m.role for m in log.samples[0].messages]}}))
    """)
    # tsbench itself is found as in this process; inspect names a task `tsbench/...` when the module
    # belongs to an installed distribution (here the editable install).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]))
    res = readiness.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["status"] == "success" and report["task"] == "tsbench/anomalyxl" and report["n"] == 1
    assert report["roles"] == ["system", "user", "assistant"]  # single-pass-text, the default
    assert report["scores"] == [1.0 if report["gold"][0] == "Yes" else 0.0]
