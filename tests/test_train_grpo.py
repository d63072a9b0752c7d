"""train-grpo end to end with the real SmolLM2-135M (LoRA), the real rlm harness and sandbox.

Kept tiny for CPU: G = 2, 2 rollouts per step, 2 turns, 24 new tokens, L = 1024 localize tasks.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys

import pandas as pd
import pytest
import torch

from tsbench.core.errors import UserError
from tsbench.harness import EpisodeTask, HarnessConfig
from tsbench.harness.rlm import run_rlm
from tsbench.models.base import Message
from tsbench.train.grpo import GRPOConfig, Sample, train_grpo, update_policy
from tsbench.train.policy import (VLLM_MISSING, BatchingEngine, ChatTokens, PolicyChatModel, VLLMEngine,
                                  load_policy, load_tokenizer, resolve_model)
from tsbench.train import grpo as grpo_module
from tsbench.train import rollouts as rollout_module
from tsbench.train.rollouts import assemble_sequence

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol():
    source = resolve_model("local/smollm2-135m")
    return source, load_tokenizer(source)


class ScriptedEngine:
    """Hands out fixed output ids, one list per request, and records the prompts it was given."""

    def __init__(self, outputs: list[list[int]]):
        self.outputs = list(outputs)
        self.prompts: list[list[int]] = []

    def generate(self, requests):
        self.prompts += [list(r.prompt_ids) for r in requests]
        return [self.outputs.pop(0) for _ in requests]

    def sync_weights(self, model):
        pass

    def close(self):
        pass


def test_three_turn_episode_keeps_ids_as_generated(smol):
    source, tokenizer = smol
    chat = ChatTokens(tokenizer)
    eos = tokenizer.eos_token_id
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    # reply 1 spells "print" one character per token: decoding and re-tokenising would merge them
    spelled = [encode(c)[0] for c in "print"]
    reply1 = encode("```python\n") + spelled + encode("(L)\n```") + [eos]
    reply2 = encode("```python\nprint(len(channels))\n```")  # cut off by the length limit: no end token
    reply3 = encode('{"present": false}') + [eos]
    engine = ScriptedEngine([reply1, reply2, reply3])
    session = PolicyChatModel(BatchingEngine(engine), chat, max_new_tokens=64, max_seq_len=4096)
    values = torch.linspace(0, 1, 64).numpy()[None, :]
    task = EpisodeTask("t-1", "localize", "precise", "Is there an anomaly?", ["ch_00"], values)
    result = run_rlm(session, task, HarnessConfig(max_turns=3), image=False)

    assert result.turns == 3 and result.forced_final and result.final_message == '{"present": false}'
    observations = [e["observation"] for e in result.transcript if e["role"] == "tool"]
    assert observations[0].strip().endswith("64") and observations[1].strip().endswith("1")
    (p1, o1), (p2, o2), (p3, o3) = session.turns
    assert [t["prompt_ids"] for t in result.token_trace] == [p1, p2, p3]
    messages = [Message("system", result.transcript[0]["content"]), Message("user", "Is there an anomaly?")]
    assert p1 == chat.first_prompt(messages) == list(tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in messages], add_generation_prompt=True, return_dict=True)["input_ids"])
    # after a reply that ended itself, only the newline of the closing "<|im_end|>\n" is added
    assert p2 == p1 + reply1 + encode(f"\n<|im_start|>user\n{observations[0]}<|im_end|>\n<|im_start|>assistant\n")
    # after a cut-off reply the template's closing comes in full; the last turn carries the notice
    closing = encode(f"<|im_end|>\n<|im_start|>user\n{observations[1]}")
    assert p3[: len(p2) + len(reply2) + len(closing)] == p2 + reply2 + closing
    assert "FINAL TURN" in tokenizer.decode(p3[len(p2) + len(reply2):])
    ids, mask = assemble_sequence(session.turns)
    assert ids == p3 + reply3
    assert [t for t, m in zip(ids, mask) if m] == reply1 + reply2 + reply3  # spelled ids kept as generated
    assert encode(tokenizer.decode(reply1)) != reply1


def test_a_changed_history_is_refused(smol):
    _, tokenizer = smol
    eos = tokenizer.eos_token_id
    session = PolicyChatModel(BatchingEngine(ScriptedEngine([[eos], [eos]])), ChatTokens(tokenizer))
    first = [Message("system", "s"), Message("user", "u")]
    reply = session.generate(first)
    with pytest.raises(RuntimeError, match="changed"):
        session.generate([Message("system", "edited"), Message("user", "u"), Message("assistant", reply.text),
                          Message("user", "more")])


def test_context_budget_caps_replies(smol):
    _, tokenizer = smol
    engine = ScriptedEngine([[5, 6]])
    session = PolicyChatModel(BatchingEngine(engine), ChatTokens(tokenizer), max_new_tokens=50, max_seq_len=40)
    from tsbench.models.base import ModelError

    with pytest.raises(ModelError, match="context full"):
        session.generate([Message("user", "word " * 60)])


def test_vllm_engine_missing_is_one_clear_line():
    pytest.importorskip("transformers")
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vLLM is installed here")
    with pytest.raises(UserError) as caught:
        VLLMEngine("some/model", "some/model", max_seq_len=1024, gpu_memory_utilization=0.3, seed=0)
    assert str(caught.value) == VLLM_MISSING and "\n" not in VLLM_MISSING


def test_update_moves_only_the_lora_weights(smol):
    from accelerate import Accelerator

    source, tokenizer = smol
    model = load_policy(source, lora_rank=4)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    model.train()
    ids = tokenizer("The series rises and then falls back to its level.", add_special_tokens=False)["input_ids"]
    samples = [Sample(ids, [0] * 4 + [1] * (len(ids) - 4), 1.0), Sample(ids[:8], [0] * 4 + [1] * 4, -1.0)]
    cfg = GRPOConfig(model="local/smollm2-135m", lora=4, max_grad_norm=1e9)
    stats = update_policy(accelerator, model, None, optimizer, samples, cfg, tokenizer.pad_token_id)
    assert all(math.isfinite(v) for v in stats.values())
    n = len(ids) - 4 + 4
    assert stats["trained_tokens"] == n
    assert stats["policy_loss"] == pytest.approx(-((len(ids) - 4) - 4) / n, abs=1e-5)  # on-policy: -mean(A)
    changed = {name for name, p in model.named_parameters() if not torch.equal(p.detach(), before[name])}
    assert changed and all("lora_" in name for name in changed)
    assert any("lora_B" in name for name in changed)


def _config(tmp_path, **changes) -> GRPOConfig:
    settings = dict(
        model="local/smollm2-135m", lora=8, steps=2, group_size=2, batch_size=2, max_turns=2, max_new_tokens=24,
        preset="small", lengths=(1024,), categories=("localize",), rollout_workers=1, lr=1e-4, save_every=1,
        out=str(tmp_path / "run"), seed=1,
    )
    settings.update(changes)
    return GRPOConfig(**settings)


def test_two_steps_checkpoint_eval_and_resume(tmp_path, small_data, monkeypatch):
    # SmolLM2 almost never scores on AnomalyXL, which would drop every group; a scorer that alternates
    # 1, 0 gives each group of two a reward spread, so every step really updates the LoRA.
    calls = itertools.count()
    monkeypatch.setattr(rollout_module, "score_metrics", lambda category, gold, message: {
        "score": float(next(calls) % 2 == 0), "valid": True, "parsed": None, "error": None})
    seen = []
    cfg = _config(tmp_path)
    out = train_grpo(cfg, progress=lambda step, total, row: seen.append((step, total, row)))
    assert [s[0] for s in seen] == [1, 2] and all(s[1] == 2 for s in seen)
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert metrics["step"].tolist() == [1, 2]
    for column in ("loss", "mean_score", "mean_reward", "grad_norm", "lr", "step_s", "dropped_groups",
                   "forced_final_rate", "mean_turns", "mean_tokens", "kl", "token_penalty", "fail_penalty"):
        assert metrics[column].map(math.isfinite).all(), column
    assert metrics["p_present"].tolist() == [1.0, 0.8]  # round(2 * 220 / 300) = 1 warm step
    assert (metrics["dropped_groups"] == 0).all() and (metrics["trained_tokens"] > 0).all()
    assert (metrics["grad_norm"] > 0).all()  # (the on-policy loss value itself is 0 when both replies are equally long)
    checkpoint = out / "checkpoints" / "step-000002"
    adapter = json.loads((checkpoint / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == "smollm2-135m" and adapter["r"] == 8
    assert (out / "final").resolve() == checkpoint.resolve()
    rollouts = pd.read_parquet(out / "rollouts" / "samples.parquet")
    assert len(rollouts) == 4 and set(rollouts["epoch"]) == {0, 1} and rollouts["id"].nunique() == 2
    assert {json.loads(m)["step"] for m in rollouts["metrics"]} == {1, 2}

    # the checkpoint is a model that `tsbench eval --model local/<dir>` runs
    res = subprocess.run(
        [sys.executable, "-m", "tsbench.cli", "eval", "--model", f"local/{checkpoint}", "--harness", "rlm",
         "--data", str(small_data), "--regime", "precise", "--categories", "localize", "--lengths", "1024",
         "--limit", "1", "--max-turns", "1", "--max-tokens", "8", "--concurrency", "1", "--out", str(tmp_path / "eval")],
        capture_output=True, text=True, timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    evaluated = pd.read_parquet(tmp_path / "eval" / "samples.parquet")
    assert len(evaluated) == 1 and evaluated["error_type"].isna().all()

    # without --resume the run dir is not overwritten; with it, training continues at step 3
    with pytest.raises(UserError, match="--resume"):
        train_grpo(_config(tmp_path, steps=3))
    seen.clear()
    def equal_rewards(group, cfg):  # every group is dropped, so step 3 skips the (slow on CPU) update
        for r in group:
            r.reward = 0.0

    monkeypatch.setattr(grpo_module, "assign_rewards", equal_rewards)
    train_grpo(_config(tmp_path, steps=3, resume=True), progress=lambda step, total, row: seen.append(step))
    assert seen == [3]
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert metrics["step"].tolist() == [1, 2, 3] and math.isfinite(metrics["loss"].iloc[-1])
    assert metrics["dropped_groups"].tolist()[-1] == 1
    state = torch.load(out / "checkpoints" / "step-000003" / "trainer_state.pt", weights_only=False)
    assert state["step"] == 3 and state["optimizer"]["state"]  # Adam's moments came back from step 2
    assert [p.name for p in sorted((out / "checkpoints").glob("step-*"))] == ["step-000002", "step-000003"]
    with pytest.raises(UserError, match="different"):
        train_grpo(_config(tmp_path, steps=4, resume=True, group_size=4, batch_size=4))


def test_full_parameter_run_with_kl_saves_a_plain_model(tmp_path, monkeypatch):
    """Full fine-tuning of a tiny random Llama (SmolLM2's tokenizer), TimeMaster's advantage and KL:
    the checkpoint is a plain Hugging Face model dir that `local/<dir>` loads."""
    import transformers

    from tsbench.models.registry import get_model
    from tsbench.testing.tiny import make_tiny_random_llama

    base = make_tiny_random_llama(tmp_path / "tiny", hidden_size=16, layers=1, heads=2, kv_heads=1,
                                  intermediate_size=32, context=4096)
    calls = itertools.count()
    monkeypatch.setattr(rollout_module, "score_metrics", lambda category, gold, message: {
        "score": float(next(calls) % 2 == 0), "valid": True, "parsed": None, "error": None})
    cfg = _config(tmp_path, model=f"local/{base}", lora=None, full=True, steps=1, max_turns=1, max_new_tokens=8,
                  advantage="grpo", kl_beta=0.001, lr=1e-3)
    out = train_grpo(cfg)
    metrics = pd.read_parquet(out / "metrics.parquet")
    assert metrics["trained_tokens"].iloc[0] > 0 and metrics["grad_norm"].iloc[0] > 0
    assert math.isfinite(metrics["kl"].iloc[0]) and metrics["forced_final_rate"].iloc[0] == 1.0  # one turn: forced
    checkpoint = out / "final"
    assert (checkpoint / "config.json").is_file() and not (checkpoint / "adapter_config.json").exists()
    trained = transformers.AutoModelForCausalLM.from_pretrained(checkpoint)
    original = transformers.AutoModelForCausalLM.from_pretrained(base)
    assert not torch.equal(trained.model.norm.weight, original.model.norm.weight)
    model = get_model(f"local/{checkpoint}", max_new_tokens=4)
    try:
        assert model.generate([Message("user", "hello")]).output_tokens > 0
    finally:
        model.close()
