"""A local vision-language model under eval (single-pass-image, rlm-image) and TimeMaster's warm start
(`sft-baseline --format timemaster-traces`) from trace files and from a teacher's eval run, all on the
toy `trend` plots and a tiny random Qwen2.5-VL built here (nothing downloaded)."""

from __future__ import annotations

import json

import pytest
import torch

from tsbench import results as schema
from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.eval.config import EvalConfig
from tsbench.eval.runner import run_eval
from tsbench.models.tiny_vlm import make_tiny_random_vlm
from tsbench.tasks.trend.taskset import QUESTION, Trend, draw, make_row
from tsbench.testing.fake_openai_server import FakeOpenAIServer
from tsbench.train.sft import run_sft
from tsbench.train.sft_config import SFTConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory):
    return make_tiny_random_vlm(tmp_path_factory.mktemp("vlm") / "tiny")


@pytest.fixture(scope="module")
def trend_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("trend")
    Trend().generate({"seed": 0, "rows": 4}, root)
    return root / "seed0"


def eval_config(**settings) -> EvalConfig:
    return build(EvalConfig, {"family": "trend", "concurrency": 1, "max_tokens": 6, **settings})


@pytest.mark.parametrize("harness", ["single-pass-image", "rlm-image"])
def test_a_local_vlm_plays_image_harnesses(vlm_dir, trend_data, tmp_path, harness):
    cfg = eval_config(
        model=f"local/{vlm_dir}", harness=harness, data=[str(trend_data)], max_turns=2, out=str(tmp_path / "run")
    )
    rows = schema.load_samples(run_eval(cfg))
    assert len(rows) == 4 and rows["error_type"].isna().all(), rows["error_message"].tolist()
    assert (rows["model"] == f"local/{vlm_dir}").all()


def sft_config(model_dir, data, out, **extra) -> SFTConfig:
    values = {
        "model": f"local/{model_dir}",
        "lora": 0,
        "format": "timemaster-traces",
        "data": data,
        "epochs": 1,
        "lr": 1e-3,
        "batch_size": 2,
        "family": "trend",
        "gradient_checkpointing": False,
        "out": str(out),
    }
    return build(SFTConfig, {**values, **extra})


def visual_weights(model_dir) -> torch.Tensor:
    from safetensors.torch import load_file

    weights = load_file(str(model_dir / "model.safetensors"))
    return torch.cat([v.flatten().float() for k, v in sorted(weights.items()) if "visual" in k])


def test_warm_start_on_trace_files_trains_the_vision_tower(vlm_dir, tmp_path):
    lines = []
    for i in range(4):
        label, values = make_row(f"sft-{i}")
        (tmp_path / f"{i}.png").write_bytes(draw(values))
        trace = f"<think> {'up' if label == 'rising' else 'down'} </think> <class>{label}</class>"
        lines.append(json.dumps({"prompt": QUESTION, "image": f"{i}.png", "response": trace}))
    lines.append(json.dumps({"prompt": QUESTION, "image": "0.png", "response": "rising"}))  # no tags: skipped
    (tmp_path / "traces.jsonl").write_text("\n".join(lines))
    out = run_sft(sft_config(vlm_dir, [str(tmp_path / "traces.jsonl")], tmp_path / "sft"))
    run = json.loads((out / "run.json").read_text())
    assert run["data"]["selection"] == {"kept": 4, "skipped": {"not_a_trace": 1}}
    assert not torch.allclose(visual_weights(vlm_dir), visual_weights(out))  # the pixels reached the loss
    from tsbench.models.registry import get_model

    assert type(get_model(f"local/{out}")).__name__ == "LocalVLMModel"


def test_warm_start_from_a_teacher_eval_run_rebuilds_prompts_with_their_plots(vlm_dir, trend_data, tmp_path):
    with FakeOpenAIServer(default="ok:<think> it goes up </think> <class>rising</class>") as server:
        cfg = eval_config(
            model="openai/fake-model",
            base_url=server.base_url,
            harness="single-pass-image",
            data=[str(trend_data)],
            out=str(tmp_path / "teacher"),
        )
        teacher = run_eval(cfg)
        images = sum(1 for body in server.bodies for m in body["messages"] if isinstance(m["content"], list))
    assert images == 4
    rows = schema.load_samples(teacher)
    right = int((rows["score"] == 1).sum())
    assert 0 < right < 4
    from tsbench.train.sft_timemaster import load_traces

    traces, selection = load_traces([str(teacher)], min_score=0.5)
    assert len(traces) == right and all(len(t.images) == 1 for t in traces)
    assert selection["skipped"] == {"below_min_score_or_error": 4 - right}
    out = run_sft(sft_config(vlm_dir, [str(teacher)], tmp_path / "sft"))
    assert json.loads((out / "run.json").read_text())["eval_hint"]["harness"] == "single-pass-image"


def test_no_traces_is_one_line(vlm_dir, tmp_path):
    (tmp_path / "t.jsonl").write_text(json.dumps({"prompt": "q", "response": "plain"}))
    with pytest.raises(UserError, match="no <think>/<class> traces"):
        run_sft(sft_config(vlm_dir, [str(tmp_path / "t.jsonl")], tmp_path / "sft"))


def test_a_lora_warm_start_folds_into_the_vlm_policy_grpo_loads(vlm_dir, tmp_path):
    from tsbench.train.config import PolicyConfig
    from tsbench.train.policy import WARM_START, load_policy

    label, values = make_row("w")
    (tmp_path / "0.png").write_bytes(draw(values))
    line = {"prompt": QUESTION, "image": "0.png", "response": f"<think> x </think> <class>{label}</class>"}
    (tmp_path / "t.jsonl").write_text(json.dumps(line))
    adapter = run_sft(sft_config(vlm_dir, [str(tmp_path / "t.jsonl")], tmp_path / "sft", lora=4))
    assert (adapter / "adapter_config.json").is_file()
    policy = load_policy(PolicyConfig(model=f"local/{adapter}", lora=4), tmp_path / "run", on_gpu=False)
    assert policy.processor is not None and type(policy.model).__name__ == "Qwen2_5_VLForConditionalGeneration"
    assert policy.warm_start == str(adapter.resolve())
    assert (tmp_path / "run" / WARM_START / "processor_config.json").is_file()
