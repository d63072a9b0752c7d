"""A harness whose settings subclass another harness's (issue 46): a plugin `rlm-budget` with
`RLMBudgetSettings(RLMSettings)` adding `max_cells` takes rlm's `depth` and its own `max_cells` as flags, as
-H pairs and from [eval.rlm-budget] (and rlm's own [eval.rlm]) in TOML, lists both under `--harness
rlm-budget --help`, and still refuses a setting of another harness in one line. Real 2-row evals of
scripted/trivial-code in subprocesses, with the plugin installed as a distribution (as test_plugins does)."""

from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest

from test_plugins import install, tsbench

BUDGET_PLUGIN = textwrap.dedent('''
    """rlm with a cap on code cells: its settings extend rlm's."""
    from dataclasses import dataclass

    from tsbench.core.settings import setting
    from tsbench.harness import Harness, get_harness
    from tsbench.harness.rlm import RLM, RLMSettings


    @dataclass
    class RLMBudgetSettings(RLMSettings):
        """[rlm-budget]: rlm's settings and a cap on code cells."""

        max_cells: int = setting(8, "Code cells an episode may run.", ge=1)


    class RLMBudget(RLM, Harness[RLMBudgetSettings]):
        def run(self, agent, task, cfg):
            result = super().run(agent, task, cfg)
            result.attributes["max_cells"] = str(cfg.max_cells)
            return result

        def pairing_problem(self, agent, cfg):  # plays what rlm plays (scripted/trivial-code names rlm)
            return get_harness("rlm").pairing_problem(agent, cfg)
''')


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return install(
        tmp_path_factory.mktemp("site"),
        "tsb-budget-plugin",
        {"tsb_budget_plugin": BUDGET_PLUGIN},
        "[tsbench.plugins]\nharness.rlm-budget = tsb_budget_plugin:RLMBudget\n",
    )


def _eval(site, small_data, out, *extra):
    args = ["eval", "--model", "scripted/trivial-code", "--data", str(small_data), "--limit", "2"]
    return tsbench(site, *args, "--max-turns", "1", "--unsafe-sandbox", "--out", str(out), *extra)


def test_a_harness_whose_settings_subclass_rlms_takes_flags_pairs_and_toml(site, small_data, tmp_path):
    helped = tsbench(site, "eval", "--harness", "rlm-budget", "--help")
    assert helped.returncode == 0, helped.stderr[-2000:]
    text = " ".join(helped.stdout.split())
    assert "--max-cells" in text and "--depth" in text and "Code cells an episode may run." in text
    assert "--max-tool-calls" not in text  # tools' own settings are not rlm-budget's
    plain = " ".join(tsbench(site, "eval", "--help").stdout.split())
    assert "rlm-budget" in plain and "--max-cells" not in plain  # listed among the harnesses, settings apart

    config = tmp_path / "budget.toml"
    config.write_text('[eval]\nharness = "rlm-budget"\n\n[eval.rlm-budget]\ndepth = 1\n')
    runs = {
        "flags": _eval(
            site, small_data, tmp_path / "flags", "--harness", "rlm-budget", "--depth", "1", "--max-cells", "3"
        ),
        "pairs": _eval(
            site, small_data, tmp_path / "pairs", "--harness", "rlm-budget", "-H", "depth=1", "-H", "max_cells=3"
        ),
        "toml": _eval(site, small_data, tmp_path / "toml", "--config", str(config), "-H", "max_cells=3"),
    }
    for name, done in runs.items():
        assert done.returncode == 0, (name, done.stderr[-3000:])
        run = json.loads((tmp_path / name / "run.json").read_text())
        assert run["harness"] == "rlm-budget" and run["settings"]["depth"] == 1 and run["settings"]["max_cells"] == 3
        samples = pd.read_parquet(tmp_path / name / "samples.parquet")
        assert len(samples) == 2 and (samples["depth"] == 1).all() and samples["error_type"].isna().all()
        assert all(dict(a)["max_cells"] == "3" for a in samples["attributes"])

    refused = _eval(site, small_data, tmp_path / "refused", "--harness", "rlm-budget", "--max-tool-calls", "2")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr[-2000:]
    assert "max_tool_calls (--max-tool-calls) is a setting of [tools], which harness rlm-budget" in refused.stderr
    refused = _eval(site, small_data, tmp_path / "refused", "--harness", "rlm", "--max-cells", "2")
    assert refused.returncode == 2 and "is a setting of [rlm-budget], which harness rlm does not have" in refused.stderr
    assert not (tmp_path / "refused").exists()
