"""train-grpo on TRL with real models: the episode seam (ids and masks through the real rlm harness
and jail), two SmolLM2 LoRA steps with a checkpoint that `tsbench eval` loads and an exact resume,
the KL reference after an SFT warm start, and TimeMaster's composite reward with a scripted judge
(a real OpenAI-wire server on 127.0.0.1)."""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.harness import EpisodeTask, HarnessSettings, play
from tsbench.models.resolve import resolve_model
from tsbench.tasks.anomalyxl.taskset import AnomalyXL
from tsbench.tasks.base import Scored
from tsbench.testing.fake_openai_server import FakeOpenAIServer
from tsbench.testing.tiny import make_small_vocab_llama, make_tiny_random_llama
from tsbench.train import rewards as rw
from tsbench.train.backends import Reply
from tsbench.train.batcher import Batcher
from tsbench.train.chat_tokens import ChatTokens
from tsbench.train.config import GRPOConfig
from tsbench.train.grpo import build_trainer, train_grpo
from tsbench.train.policy import load_tokenizer
from tsbench.train.policy_agent import PolicyAgent, assemble
from tsbench.train.rollouts import Environment

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def smol_tokenizer():
    source = resolve_model("local/smollm2-135m")
    return load_tokenizer(source.weights, True)


class Scripted:
    """A backend that hands out fixed replies (token ids), one per request, and records the prompts."""

    def __init__(self, replies: list[list[int]]):
        self.replies = list(replies)
        self.prompts: list[list[int]] = []

    def generate(self, requests):
        self.prompts += [list(r.prompt_ids) for r in requests]
        return [Reply(self.replies.pop(0)) for _ in requests]


def test_three_turn_rlm_episode_keeps_ids_and_masks_observations(smol_tokenizer):
    tok = smol_tokenizer
    encode = lambda text: tok(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    eos = tok.eos_token_id
    spelled = [encode(c)[0] for c in "print"]  # decoding and re-tokenising would merge these
    reply1 = encode("```python\n") + spelled + encode("(L)\n```") + [eos]
    reply2 = encode("```python\nprint(len(channels))\n```")  # cut off by the length limit: no end token
    reply3 = encode('{"present": false}') + [eos]
    chat = ChatTokens(tok)
    agent = PolicyAgent(Batcher(Scripted([reply1, reply2, reply3])), chat, max_new_tokens=64, max_seq_len=4096)
    task = EpisodeTask(
        "t-1", "localize", "precise", "Is there an anomaly?", ["ch_00"], torch.linspace(0, 1, 64).numpy()[None, :]
    )
    outcome = play(agent, "rlm", task, HarnessSettings(max_turns=3))
    assert outcome.finished and outcome.result.turns == 3 and outcome.result.forced_final
    observations = [e["observation"] for e in outcome.result.transcript if e["role"] == "tool"]
    assert observations[0].strip().endswith("64") and observations[1].strip().endswith("1")

    prompt, completion, mask, logprobs = assemble(agent.turns)
    assert prompt == agent.turns[0].prompt_ids and logprobs is None
    generated = [t for t, m in zip(completion, mask) if m]
    assert generated == reply1 + reply2 + reply3  # every reply exactly as generated, in order
    assert completion[: len(reply1)] == reply1 and mask[: len(reply1)] == [1] * len(reply1)
    shown = tok.decode([t for t, m in zip(completion, mask) if not m])
    assert "Output:" in shown and "64" in shown and "FINAL TURN" in shown  # observations and notice: masked
    assert "print" not in shown and "present" not in shown
    # after a reply that closed itself only the template's newline + the next message are added
    glue = agent.turns[1].prompt_ids[len(prompt) + len(reply1) :]
    assert tok.decode(glue[:1]) == "\n" and eos not in glue[:1]
    assert [t["prompt_ids"] for t in outcome.result.token_trace] == [t.prompt_ids for t in agent.turns]


class WordCount(AnomalyXL):
    """AnomalyXL tasks scored 1 / (1 + words in the reply): a reward that differs between rollouts."""

    name = "word-count"

    def score(self, category, gold, message):
        return Scored(score=1.0 / (1 + len(message.split())), valid=True)


def run_config(model: str, out: Path, **extra) -> GRPOConfig:
    return build(
        GRPOConfig,
        {
            "model": model,
            "lora": 4,
            "lora_target": "q_proj,v_proj",
            "steps": 2,
            "group_size": 2,
            "batch_size": 2,
            "micro_batch_size": 1,
            "lr": 1e-3,
            "max_seq_len": 1024,
            "harness": "single-pass-text",
            "max_tokens": 12,
            "answer_cut_replies": True,
            "text_budget_chars": 120,
            "family": f"{__name__}:WordCount",
            "preset": "small",
            "lengths": [1024],
            "categories": ["localize"],
            "save_every": 1,
            "rollout_workers": 2,
            "out": str(out),
            **extra,
        },
    )


@pytest.mark.slow
def test_smollm2_lora_two_steps_then_eval_the_checkpoint(tmp_path, small_data):
    run = tmp_path / "run"
    train_grpo(run_config("local/smollm2-135m", run))
    metrics = pd.read_parquet(run / "metrics.parquet")
    print(metrics[["step", "mean_score", "reward", "loss", "grad_norm", "step_time"]].to_string(index=False))
    assert metrics["step"].tolist() == [1, 2] and metrics["loss"].notna().all()
    assert (metrics["dropped_groups"] == 0).all() and (metrics["grad_norm"] > 0).all()
    adapter = json.loads((run / "final" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == "smollm2-135m" and adapter["r"] == 4
    rollouts = pd.read_json(run / "rollouts" / "samples.jsonl", lines=True)
    assert len(rollouts) == 4 and rollouts["family"].eq("word-count").all() and rollouts["output_tokens"].gt(0).all()
    assert (run / "checkpoints" / "checkpoint-2" / "adapter_model.safetensors").is_file()

    # The checkpoint loads as `local/<run>/final` in eval.
    from tsbench.eval.config import EvalConfig
    from tsbench.eval.runner import run_eval

    cfg = build(
        EvalConfig,
        {
            "model": f"local/{run / 'final'}",
            "harness": "single-pass-text",
            "data": [str(small_data)],
            "regime": "precise",
            "categories": ["localize"],
            "limit": 1,
            "max_tokens": 6,
            "text_budget_chars": 120,
            "out": str(tmp_path / "eval"),
        },
    )
    samples = pd.read_parquet(run_eval(cfg) / "samples.parquet")
    assert samples["error_type"].isna().all() and samples["output_tokens"].gt(0).all()


def test_resume_continues_exactly(tmp_path):
    """A run cut after step 1 and resumed draws the same step-2 episodes and ends with the same weights."""
    from safetensors.torch import load_file

    model = f"local/{make_small_vocab_llama(tmp_path / 'small')}"
    run = tmp_path / "run"
    train_grpo(run_config(model, run, lr=1e-2, max_tokens=4, group_size=4, batch_size=8, rollout_workers=8))
    again = tmp_path / "again"
    shutil.copytree(run, again, ignore=shutil.ignore_patterns("checkpoint-2", "final", "rollouts"))
    with pytest.raises(UserError, match="--resume"):
        train_grpo(run_config(model, again, lr=1e-2, max_tokens=4, group_size=4, batch_size=8))
    train_grpo(
        run_config(model, again, lr=1e-2, max_tokens=4, group_size=4, batch_size=8, rollout_workers=8, resume=True)
    )
    first = pd.read_json(run / "rollouts" / "samples.jsonl", lines=True)
    second = pd.read_json(again / "rollouts" / "samples.jsonl", lines=True)
    assert second["id"].tolist() == first["id"].tolist()[8:]  # only step 2 ran again
    assert second["final_message"].tolist() == first["final_message"].tolist()[8:]
    a, b = (load_file(str(d / "final" / "adapter_model.safetensors")) for d in (run, again))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    step1 = load_file(str(run / "checkpoints" / "checkpoint-1" / "adapter_model.safetensors"))
    assert any(not torch.equal(step1[k], a[k]) for k in a)  # step 2 moved the adapter
    assert pd.read_parquet(again / "metrics.parquet")["step"].tolist() == [1, 2]


def test_report_to_tensorboard_logs_each_step_under_the_run_dir(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = f"local/{make_small_vocab_llama(tmp_path / 'small')}"
    run = tmp_path / "run"
    train_grpo(run_config(model, run, max_tokens=4, report_to=["tensorboard"]))
    events = EventAccumulator(str(run / "tensorboard")).Reload()
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2]
    assert not (run / "checkpoints" / "runs").exists()  # nothing left in TRL's default place


def test_kl_reference_after_an_sft_warm_start_is_the_warm_start_policy(tmp_path):
    """--model is an SFT LoRA adapter: it is folded into <run>/warm_start, a NEW adapter of the --lora
    rank trains on top, and TRL's reference (the adapter switched off) is exactly the warm start;
    with full training TRL's reference model loads from the same directory."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    from tsbench.models.registry import get_model

    base_dir = make_tiny_random_llama(tmp_path / "base")
    base = AutoModelForCausalLM.from_pretrained(base_dir)
    torch.manual_seed(1)
    sft = get_peft_model(
        base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    sft.save_pretrained(tmp_path / "sft")
    ids = torch.tensor([[1, 17, 423, 99, 5000, 12, 7]])

    def logits(model) -> torch.Tensor:
        with torch.no_grad():
            return model(input_ids=ids).logits.float()

    warm = get_model(f"local/{tmp_path / 'sft'}")  # the warm-start policy as eval loads it
    expected, pre_sft = logits(warm.model), logits(AutoModelForCausalLM.from_pretrained(base_dir))
    warm.close()
    assert not torch.allclose(expected, pre_sft, atol=1e-4)  # the adapter does change the policy

    common = {
        "model": f"local/{tmp_path / 'sft'}",
        "beta": 0.001,
        "steps": 1,
        "group_size": 2,
        "batch_size": 2,
        "harness": "single-pass-text",
        "preset": "small",
    }
    run = build_trainer(build(GRPOConfig, {**common, "lora": 4, "out": str(tmp_path / "lora")}))
    model = run.trainer.model
    assert (
        isinstance(model, PeftModel) and list(model.peft_config) == ["default"] and model.peft_config["default"].r == 4
    )
    assert (tmp_path / "lora" / "warm_start" / "config.json").is_file()
    assert run.base_record == str((tmp_path / "lora" / "warm_start").resolve())
    with model.disable_adapter():  # how TRL scores the reference for a LoRA policy
        assert torch.allclose(logits(model), expected, atol=1e-5)

    full = build_trainer(build(GRPOConfig, {**common, "lora": 0, "out": str(tmp_path / "full")}))
    assert full.trainer.ref_model is not None
    assert torch.allclose(logits(full.trainer.ref_model), expected, atol=1e-5)
    assert torch.allclose(logits(full.trainer.model), expected, atol=1e-5)


def test_timemaster_composite_reward_with_a_scripted_judge(tmp_path, smol_tokenizer):
    from accelerate import Accelerator

    tok = smol_tokenizer
    with FakeOpenAIServer(default="ok:0.65") as server:  # the public judge answers one float
        cfg = build(
            GRPOConfig,
            {
                "model": "local/smollm2-135m",
                "reward": "composite",
                "judge": "openai/fake-model",
                "judge_base_url": server.base_url,
                "group_size": 3,
                "batch_size": 3,
                "steps": 1,
                "harness": "single-pass-text",
                "text_budget_chars": 80,
                "preset": "small",
                "categories": ["localize"],
                "lengths": [1024],
                "loss": "grpo",
                "beta": 0.001,
            },
        )
        cfg.validate()
        key = "step-000001/task-00"

        class ScriptedEnvironment(Environment):
            def backend(self, trainer):
                import contextlib

                return contextlib.nullcontext((scripted, None))

        env = ScriptedEnvironment(cfg, tok, tmp_path, model_name="scripted")
        gold = env.sample(key).gold
        answer = json.dumps(
            {"present": True, "start": gold["start"], "end": gold["end"]} if gold["present"] else {"present": False}
        )
        replies = [
            f"<think>a step up</think>\n<class>{answer}</class><extension>Replace the sensor.</extension>",
            f"Answer: <class>{answer}</class>",  # right class, no <think>: well formed for the public code
            '<think>flat</think><class>{"present": false, "start": 0, "end": 0}</class><extension>x</extension>',
        ]
        if not gold["present"]:
            replies[2] = replies[2].replace("false", "true").replace('"end": 0', '"end": 9')
        scripted = Scripted([tok(r, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for r in replies])
        trainer = types.SimpleNamespace(accelerator=Accelerator(cpu=True))
        out = env([key] * 3, trainer)
        assert server.request_count == 1  # only the well-formed, correct rollout is judged
        assert "Replace the sensor." in server.bodies[0]["messages"][0]["content"]
        assert server.bodies[0]["temperature"] == 1.0  # the public code's judge temperature

    assert out["judge_score"] == [pytest.approx(0.65), None, None]
    fmt, hard, soft = (fn(prompts=[key] * 3, completions=None, **out) for fn in env.functions)
    assert fmt == [1.0, 1.0, 1.0] and hard == [1.0, 1.0, 0.0] and soft == [pytest.approx(0.65), 0.0, 0.0]
    totals = rw.weighted_total(env.functions, env.weights, [key] * 3, out)
    assert env.weights == [0.1, 0.9, 0.5]  # TimeMaster's public code weighs the judge's score 0.5
    assert totals == pytest.approx([0.1 + 0.9 + 0.5 * 0.65, 1.0, 0.1])
    assert all(sum(m) > 0 for m in out["env_mask"])  # rewards differ: the group trains
    assert "<think></think>" in tok.decode(scripted.prompts[0])  # the format instructions reach the policy
    assert env.last["mean_reward"] == pytest.approx(sum(totals) / 3)
    rows = pd.read_json(tmp_path / "rollouts" / "samples.jsonl", lines=True)
    assert rows["metrics"].iloc[0]["judge"] == pytest.approx(0.65) and rows["score"].notna().all()


@pytest.fixture(scope="module")
def timerbed_train(tmp_path_factory) -> Path:
    """Two TimerBed-named tasks (CTU, ECG) as published `.ts` TRAIN files, generated as split train."""
    datasets = pytest.importorskip("aeon.datasets")
    from tsbench.tasks import get_taskset

    release = tmp_path_factory.mktemp("timerbed-release")
    rng = np.random.default_rng(0)
    for task, classes in (("CTU", ["1", "2"]), ("ECG", ["N", "A", "O"])):
        series = [rng.standard_normal((1, 48)) for _ in range(2 * len(classes))]
        datasets.save_to_ts_file(
            series,
            np.array(classes * 2),
            label_type="classification",
            path=str(release / task),
            problem_name=task,
            file_suffix="_TRAIN",
        )
    out = tmp_path_factory.mktemp("timerbed-data")
    get_taskset("timerbed").generate({"path": str(release), "seed": 1, "split": "train"}, out)
    return out / "seed1"


def test_one_cpu_step_on_timerbed_rows_draws_timerbed_tasks(tmp_path, timerbed_train):
    """family = "timerbed" and data = <dir> (the TOML keys): the tasks are TimerBed's train rows in
    shuffled epochs, the reward TimerBed's scorer; nothing of AnomalyXL's generator is drawn."""
    rows = pd.read_parquet(timerbed_train / "train.parquet", columns=["id", "category"])
    settings = {
        "model": "local/smollm2-135m",
        "lora": 4,
        "lora_target": "q_proj,v_proj",
        "steps": 1,
        "group_size": 2,
        "batch_size": 2,
        "max_seq_len": 1024,
        "harness": "single-pass-text",
        "max_tokens": 8,
        "text_budget_chars": 120,
        "family": "timerbed",
        "data": [str(timerbed_train)],
        "rollout_workers": 2,
        "out": str(tmp_path / "run"),
    }
    cfg = build(GRPOConfig, settings)
    epoch = [
        cfg.training_stream().sample(1 + n // cfg.tasks_per_step, n % cfg.tasks_per_step) for n in range(len(rows))
    ]
    assert sorted(s.ref.id for s in epoch) == sorted(rows["id"])  # one epoch = every train row once
    assert {s.task.category for s in epoch} == {"ctu", "ecg"} and all(s.columns["split"] == "train" for s in epoch)
    assert "electricity usage" in next(s for s in epoch if s.task.category == "ctu").task.question

    run = train_grpo(cfg)
    rollouts = pd.read_json(run / "rollouts" / "samples.jsonl", lines=True)
    assert len(rollouts) == 2 and rollouts["id"].tolist() == [epoch[0].ref.id] * 2
    assert rollouts["id"].str.startswith("timerbed-").all() and rollouts["category"].isin(["ctu", "ecg"]).all()
    assert (rollouts["family"] == "timerbed").all() and (rollouts["split"] == "train").all()
    assert json.loads(rollouts["gold"].iloc[0])["options"] == epoch[0].gold["options"]
    assert pd.read_parquet(run / "metrics.parquet")["step"].tolist() == [1]
    with pytest.raises(UserError, match="--preset"):
        build(GRPOConfig, {**settings, "preset": "small"}).validate()


def test_full_parameter_weights_load_fp32_and_a_bf16_autocast_step_moves_them_as_fp32_does(tmp_path):
    """On a GPU full-parameter training gets bf16 compute from mixed precision (TRL bf16=True) while
    AdamW updates fp32 master weights; pure-bf16 weights swallow lr-1e-6 updates."""
    from tsbench.train.policy import load_policy

    model = f"local/{make_small_vocab_llama(tmp_path / 'small')}"
    full = build(GRPOConfig, {"model": model, "lora": 0}).policy
    policy = load_policy(full, tmp_path / "run", on_gpu=True)  # as on a GPU (the load touches no device)
    assert {p.dtype for p in policy.model.parameters() if p.requires_grad} == {torch.float32}
    lora = load_policy(build(GRPOConfig, {"model": model, "lora": 4}).policy, tmp_path / "run", on_gpu=True)
    assert {p.dtype for p in lora.model.parameters()} == {torch.bfloat16}  # a LoRA's frozen base may be bf16

    ids = torch.tensor([[4, 5, 7, 8, 9, 10, 11, 12, 13, 2]])

    def moved(dtype: torch.dtype, autocast: bool) -> float:
        net = load_policy(full, tmp_path / "run", on_gpu=False).model.to(dtype)
        before = [p.detach().clone() for p in net.parameters()]
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-6, weight_decay=0.0)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = net(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        changed = sum(int((p.detach() != b).sum()) for p, b in zip(net.parameters(), before))
        return changed / sum(b.numel() for b in before)

    fp32, mixed, bf16 = moved(torch.float32, False), moved(torch.float32, True), moved(torch.bfloat16, False)
    print(f"share of weights moved by one lr-1e-6 step: fp32 {fp32:.4f}, bf16 autocast {mixed:.4f}, bf16 {bf16:.4f}")
    assert fp32 > 0.5 and abs(mixed - fp32) < 0.02 and bf16 < 0.05


def test_a_prompt_over_the_context_is_refused_before_the_policy_loads(tmp_path, smol_tokenizer):
    """The first prompt is measured with the model's tokenizer through the run's harness."""
    from tsbench.train.budget import check_context, first_prompt_tokens

    fits = run_config("local/smollm2-135m", tmp_path / "run")
    check_context(fits, smol_tokenizer)  # 120 characters of series text, 12-token replies, 1024 tokens
    over = run_config("local/smollm2-135m", tmp_path / "run", text_budget_chars=6000, max_tokens=200)
    assert first_prompt_tokens(over, smol_tokenizer) > first_prompt_tokens(fits, smol_tokenizer) + 1000
    with pytest.raises(UserError, match=r"takes \d+ tokens.*exceeds max_seq_len 1024") as caught:
        check_context(over, smol_tokenizer)
    assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match="exceeds max_seq_len"):
        build_trainer(over)
    assert not (tmp_path / "run").exists()  # refused before the run dir, the weights or the trainer


def test_the_timemaster_preset_fits_its_context(smol_tokenizer):
    """Measured with SmolLM2's tokenizer, which like Qwen2.5's splits every digit."""
    from tsbench.core.config import read_toml_table
    from tsbench.train.budget import check_context

    preset = Path(__file__).resolve().parents[1] / "experiments/timemaster/cpu_smoke.toml"
    check_context(build(GRPOConfig, read_toml_table(preset, "grpo")), smol_tokenizer)


class Constant(AnomalyXL):
    """Every reply scores 1: every group is flat (zero variance)."""

    name = "constant"

    def score(self, category, gold, message):
        return Scored(score=1.0, valid=True)


def test_refill_replays_a_flat_group_with_a_fresh_task_then_masks_it(tmp_path):
    """DAPO's dynamic sampling as an option: a zero-variance group is played again on a fresh task of
    the same step (refill_rounds times), and still-flat groups are masked as without refill."""
    model = f"local/{make_small_vocab_llama(tmp_path / 'small')}"
    run = tmp_path / "run"
    flat = {"lambda_tok": 0.0, "lambda_fail": 0.0, "family": f"{__name__}:Constant"}  # the reward is the score: 1
    train_grpo(run_config(model, run, steps=1, max_tokens=4, refill_rounds=2, **flat))
    rollouts = pd.read_json(run / "rollouts" / "samples.jsonl", lines=True)
    assert len(rollouts) == 6  # the group, then two refills of it
    refilled = rollouts["metrics"].map(lambda m: m.get("refilled", 0.0) == 1.0)
    assert refilled.tolist() == [True, True, True, True, False, False]
    assert rollouts["gold"].astype(str).nunique() == 3  # each round a task of its own (AnomalyXL ids: by index)
    metrics = pd.read_parquet(run / "metrics.parquet")
    assert metrics[["groups", "dropped_groups", "refilled_groups"]].iloc[0].tolist() == [1.0, 1.0, 1.0]


def test_a_memory_bank_prefixes_training_episodes_through_the_memory_wrapper(smol_tokenizer, tmp_path):
    """memory_bank in train-grpo is not silently ignored: the rollouts play the harness inside TimeClaw's
    memory wrapper, as eval does, so the first prompt the policy sees holds the precedents; without a bank
    the same episode has none."""
    from tsbench.timeclaw.bank import MemoryBank
    from tsbench.timeclaw.fingerprint import DIM

    records = [
        {
            "id": f"bank-{i}",
            "source_id": f"bank-{i}",
            "family": "localize",
            "regime": "precise",
            "length": 1024,
            "n_channels": 1,
            "descriptor": f"bank-{i}",
            "psi": [float(i)] * DIM,
            "phi": None,
            "embedder": "none",
            "trajectory": "[]",
            "rationale": f"rationale {i}",
            "summary": f"precedent summary number {i}",
            "score": 1.0,
            "model": "m",
            "harness": "single-pass-text",
            "run": "r",
            "created_at": "",
        }
        for i in range(3)
    ]
    bank = MemoryBank(records).save(tmp_path / "bank.parquet")
    key = "step-000001/task-00"

    def first_prompt(**memory) -> str:
        cfg = build(
            GRPOConfig,
            {
                "model": "local/smollm2-135m",
                "lora": 4,
                "max_steps": 1,
                "group_size": 2,
                "batch_size": 2,
                "harness": "single-pass-text",
                "max_turns": 1,
                "max_tokens": 4,
                "text_budget_chars": 200,
                "preset": "small",
                "lengths": [1024],
                "categories": ["localize"],
                **memory,
            },
        )
        scripted = Scripted([smol_tokenizer("no", add_special_tokens=False)["input_ids"]] * 2)

        class ScriptedEnvironment(Environment):
            def backend(self, trainer):
                import contextlib

                return contextlib.nullcontext((scripted, None))

        env = ScriptedEnvironment(cfg, smol_tokenizer, tmp_path / "run", model_name="scripted")
        from accelerate import Accelerator

        env([key] * 2, types.SimpleNamespace(accelerator=Accelerator(cpu=True)))
        return smol_tokenizer.decode(scripted.prompts[0])

    remembered = first_prompt(memory={"memory_bank": str(bank), "top_k": 2})  # [grpo] top_k is TRL's
    assert "precedent summary number" in remembered
    assert "precedent summary number" not in first_prompt()
