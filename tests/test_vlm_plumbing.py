"""Vision-language policies end to end on a tiny random Qwen2.5-VL (built here, nothing downloaded):
eval under single-pass-image, and GRPO whose loss forward sees the rollout's image (TRL's own image
path): the loss changes when only the image changes, and the vision tower receives gradient."""

from __future__ import annotations

import pytest
import torch

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.harness import HarnessSettings, play
from tsbench.models.base import Message
from tsbench.models.local_vlm import LocalVLMModel, encode_messages, load_processor
from tsbench.models.registry import get_model
from tsbench.models.tiny_vlm import make_tiny_random_vlm
from tsbench.tasks.base import SampleRef
from tsbench.tasks.trend.taskset import Trend, draw, make_row
from tsbench.testing.tiny import make_small_vocab_llama
from tsbench.train.config import GRPOConfig
from tsbench.train.curriculum import task_keys

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory):
    return make_tiny_random_vlm(tmp_path_factory.mktemp("vlm") / "tiny-qwen2.5-vl")


def grpo_config(model_dir, out, **extra) -> GRPOConfig:
    values = {
        "model": f"local/{model_dir}",
        "lora": 0,
        "steps": 1,
        "group_size": 4,
        "batch_size": 8,
        "micro_batch_size": 8,
        "lr": 1e-3,
        "beta": 0.001,
        "max_seq_len": 256,
        "harness": "single-pass-image",
        "max_turns": 1,
        "max_tokens": 4,
        "family": "trend",
        "lambda_tok": 0.0,
        "lambda_fail": 0.0,
        "gradient_checkpointing": False,
        "rollout_workers": 8,
        "log_rollouts": False,
        "out": str(out),
    }
    return build(GRPOConfig, {**values, **extra})


def trend_task(row_id: str):
    return Trend().load(SampleRef("trend", "", row_id)).task


def test_local_vlm_is_chosen_and_its_prompt_holds_the_image(vlm_dir):
    model = get_model(f"local/{vlm_dir}", max_new_tokens=3)
    assert isinstance(model, LocalVLMModel)
    outcome = play(model, "single-pass-image", trend_task("test-0-1"), HarnessSettings(max_tokens=3, temperature=1.0))
    assert outcome.finished and outcome.result.transcript[1]["images"] == 1
    pad = model.processor.image_token_id
    rising, falling = draw(make_row("r")[1]), draw(-make_row("r")[1])
    messages = [Message("system", "a"), Message("user", "rising or falling", images=[rising])]
    a = encode_messages(model.processor, messages)
    b = encode_messages(model.processor, [messages[0], Message("user", "rising or falling", images=[falling])])
    grid = int(a.inputs["image_grid_thw"].prod()) // model.processor.image_processor.merge_size**2
    assert a.ids == b.ids and a.ids.count(pad) == grid > 0  # the ids hold one pad per merged patch
    with torch.no_grad():
        logits = [
            model.model(input_ids=torch.tensor([e.ids]), **e.inputs).logits[0, -1] for e in (a, b)
        ]  # same ids, other pixels: other next-token logits
    assert not torch.allclose(logits[0], logits[1])


def test_an_image_harness_with_a_text_only_policy_is_refused_before_loading(vlm_dir, tmp_path):
    from tsbench.train.grpo import build_trainer

    text_model = make_small_vocab_llama(tmp_path / "text")
    with pytest.raises(UserError, match="text-only"):
        build_trainer(grpo_config(text_model, tmp_path / "run"))
    with pytest.raises(UserError, match="later observations"):
        build_trainer(grpo_config(vlm_dir, tmp_path / "run2", harness="rlm-image", unsafe_sandbox=True))


def step_batch(trainer, cfg) -> dict:
    """One step's rollouts as TRL's loss reads them (our environment plays them, TRL re-renders the images)."""
    keys = [
        k for k in task_keys(cfg.max_steps, cfg.tasks_per_step)[: cfg.tasks_per_step] for _ in range(cfg.group_size)
    ]
    trainer.model.train()
    return trainer._generate_and_score_completions([{"prompt": k} for k in keys])


@pytest.mark.parametrize("lora", [0, 4])
def test_the_loss_sees_the_image_and_the_vision_tower_gets_gradient(vlm_dir, tmp_path, lora):
    from tsbench.train.grpo import build_trainer

    cfg = grpo_config(vlm_dir, tmp_path / "run", lora=lora)
    trainer = build_trainer(cfg).trainer
    batch = step_batch(trainer, cfg)
    assert {"pixel_values", "image_grid_thw", "mm_token_type_ids"} <= set(batch)
    pad = trainer.processing_class.image_token_id
    prompt_ids = batch["prompt_ids"]
    # TRL's per-token image ids (from its own render of the conversation) sit exactly on our image pads
    assert torch.equal(batch["mm_token_type_ids"][:, : prompt_ids.shape[1]] == 1, prompt_ids == pad)
    merge = trainer.processing_class.image_processor.merge_size**2
    assert int((prompt_ids == pad).sum()) == int(batch["image_grid_thw"].prod(-1).sum()) // merge

    n = prompt_ids.shape[0]
    batch["advantages"] = torch.tensor([1.0, -1.0] * (n // 2))  # a signal, whatever the random rewards were
    batch["tool_mask"] = torch.ones_like(batch["completion_mask"])
    batch["completion_mask"] = torch.ones_like(batch["completion_mask"])
    processor = load_processor(vlm_dir)
    other = processor.image_processor(images=[_pil(draw(make_row("x")[1] * 0))] * n, return_tensors="pt")
    assert other["pixel_values"].shape == batch["pixel_values"].shape
    swapped = {**batch, "pixel_values": other["pixel_values"]}
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which this test stands in for
    with torch.no_grad():
        seen, other_seen = (logps(trainer, b) for b in (batch, swapped))
    assert not torch.allclose(seen, other_seen)  # the completion's log-probs read the pixels
    # a stale sampler (old log-probs below the policy's): the clipped surrogate's value moves with the image
    batch["old_per_token_logps"] = swapped["old_per_token_logps"] = seen - 0.05
    loss = trainer.compute_loss(trainer.model, batch)
    with torch.no_grad():
        assert not torch.isclose(loss, trainer.compute_loss(trainer.model, swapped))
    loss.backward()
    grads = {
        name: float(p.grad.abs().sum())
        for name, p in trainer.model.named_parameters()
        if p.requires_grad and p.grad is not None
    }
    vision = [v for name, v in grads.items() if "visual" in name]
    assert vision and max(vision) > 0
    if lora:
        assert all("lora_" in name for name in grads)


def logps(trainer, batch: dict) -> torch.Tensor:
    """The completion's per-token log-probs under the policy, with the batch's vision inputs (as the loss has them)."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    vision = {k: batch[k] for k in ("pixel_values", "image_grid_thw", "mm_token_type_ids", "num_images")}
    out, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.model, ids, mask, batch["completion_ids"].shape[1], batch_size=ids.shape[0], **vision
    )
    return out


def _pil(png: bytes):
    from tsbench.models.local_vlm import pil_images

    return pil_images([png])[0]
