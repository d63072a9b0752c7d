"""Run directories as inspect users expect them: resume while the settings match, a new timestamped
dir when they do not (or with --new-run), short readable names for models a server names by a path."""

from __future__ import annotations

import pytest

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.core.text import short_model_name
from tsbench.eval.config import EvalConfig, run_name
from tsbench.eval.runner import RunProgress, _play, run_eval


def test_a_path_named_server_model_gets_a_short_name():
    assert short_model_name("openai//root/.cache/tsbench/models/smollm2-135m") == "openai/smollm2-135m"
    assert short_model_name("openai/~/models/qwen/") == "openai/qwen"
    for spec in ("vllm/Qwen/Qwen3.5-4B", "local/runs/sft/final", "gpt-4.1-mini", "openai/my-model"):
        assert short_model_name(spec) == spec  # hub ids and relative paths stay whole
    cfg = build(EvalConfig, {"model": "openai//root/.cache/tsbench/models/smollm2-135m", "harness": "rlm"})
    assert run_name(cfg, _play(cfg, "rlm").settings) == "openai_smollm2-135m__rlm"
    cfg = build(EvalConfig, {"model": "openai//root/m/qwen", "harness": "rlm", "depth": 1})
    assert run_name(cfg, _play(cfg, "rlm").settings) == "openai_qwen__rlm__d1"  # the harness's own suffix


def _eval(small_data, logs, **settings) -> tuple[str, RunProgress]:
    values = dict(model="scripted/zscore", harness="single-pass-text", data=[str(small_data)], limit=2)
    progress = RunProgress()
    out = run_eval(build(EvalConfig, values | {"log_dir": str(logs)} | settings), progress=progress)
    return out.name, progress


def test_resume_only_while_the_settings_match_else_a_new_timestamped_dir(small_data, tmp_path):
    default = "scripted_zscore__single-pass-text"
    name, first = _eval(small_data, tmp_path)
    assert name == default and first.resumed == 0 and not first.notes
    name, again = _eval(small_data, tmp_path)
    assert name == default and again.resumed == 2  # the default: resumed, and said so
    name, changed = _eval(small_data, tmp_path, max_tokens=99)
    assert name.endswith(f"_{default}") and name[:4].isdigit() and changed.resumed == 0
    assert "other settings (max_tokens: None → 99)" in changed.notes[0] and name in changed.notes[0]
    again_name, changed_again = _eval(small_data, tmp_path, max_tokens=99)  # the same changed command resumes it
    assert again_name == name and changed_again.resumed == 2
    fresh = {_eval(small_data, tmp_path, new_run=True)[0] for _ in range(2)}  # inspect's one log per eval
    assert len(fresh) == 2 and not fresh & {default, name}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({default, name} | fresh)
    with pytest.raises(UserError, match="different settings .*--new-run"):  # a dir the user named is never moved
        _eval(small_data, tmp_path, max_tokens=7, out=str(tmp_path / default))
    with pytest.raises(UserError, match="--new-run .* without --out"):
        _eval(small_data, tmp_path, new_run=True, out=str(tmp_path / "mine"))
