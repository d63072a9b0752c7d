"""The pure parts of training, on hand values: rewards and penalties, zero-variance dropping, the
TimeMaster format and class rewards, the curriculum and task stream, masks, configs and presets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tsbench.core.config import build, read_toml_table
from tsbench.core.errors import UserError
from tsbench.tasks import get_taskset
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.curriculum import generator_config
from tsbench.testing import readiness
from tsbench.train import rewards as rw
from tsbench.train.config import GRPOConfig, RewardConfig
from tsbench.train.curriculum import parse_key, task_key, task_keys
from tsbench.train.grpo import prepare_run_dir
from tsbench.train.policy_agent import Turn, assemble
from tsbench.train.sft_config import SFTConfig, warmup_steps

ROOT = Path(__file__).resolve().parents[1]


# -- the paper's penalised reward ----------------------------------------------------------------
def test_penalised_reward_by_hand():
    parts = rw.penalised_rewards([1.0, 0.5, 0.0, 1.0], [100, 200, 400, 50], [False, False, True, True])
    assert [p.kappa for p in parts] == [0.25, 0.5, 1.0, 0.125]
    expected = [1 - 0.1 * 0.25, 0.5 - 0.1 * 0.5 * 0.5, 0.0 - 0.25, 1 - 0.1 * 0.125 - 0.25]
    assert [p.reward for p in parts] == pytest.approx(expected)
    # the most verbose rollout failed (s = 0): no token cost for it, only the forced-final penalty
    assert parts[2].token_penalty == 0.0 and parts[2].fail_penalty == 0.25
    assert rw.token_costs([0, 0]) == [0.0, 0.0]
    with pytest.raises(ValueError):
        rw.penalised_rewards([1.0], [1, 2], [False])


def test_trl_reward_functions_sum_to_the_penalised_reward():
    """task_score, token_cost and forced_final with weights (1, lambda_tok, lambda_fail) are R_i; kappa is
    relative to the longest rollout of the SAME task (rows grouped by their task key)."""
    functions, weights = rw.reward_functions(RewardConfig(), taskset=None)
    assert weights == [1.0, 0.1, 0.25]
    keys = ["t1", "t1", "t1", "t1", "t2", "t2"]
    columns = {
        "score": [1.0, 0.5, 0.0, 1.0, 0.2, None],
        "generated_tokens": [100, 200, 400, 50, 10, 999],
        "forced_final": [False, False, True, True, False, False],
    }
    assert rw.token_cost(prompts=keys, **columns) == pytest.approx([-0.25, -0.25, 0.0, -0.125, -0.2, None])
    assert rw.forced_final(**columns) == [0.0, 0.0, -1.0, -1.0, 0.0, None]
    totals = rw.weighted_total(functions, weights, keys, columns)
    group = rw.penalised_rewards([1.0, 0.5, 0.0, 1.0], [100, 200, 400, 50], [False, False, True, True])
    assert totals[:4] == pytest.approx([p.reward for p in group])
    # t2's other rollout failed outside the policy (score None): it earns nothing and is no yardstick for kappa
    assert totals[4] == pytest.approx(0.2 - 0.1 * 0.2) and totals[5] is None


def test_zero_variance_groups_are_dropped():
    keys = ["a", "a", "b", "b", "c", "c", "d", "d"]
    rewards = [0.0, 0.0, 0.0, 1.0, -0.25, -0.25, 0.7, None]
    assert rw.zero_variance(rewards, keys) == [True, True, False, False, True, True, True, True]
    assert rw.groups_of(["x", "y", "x"]) == [[0, 2], [1]]


# -- TimeMaster's composite reward ---------------------------------------------------------------
@pytest.mark.parametrize(
    "text, public, paper",
    [
        ("<think>it rises</think><class>rising</class><extension>check the sensor</extension>", True, True),
        ("Sure. <think>rises</think>\nSo:<class>rising</class> and <extension></extension> done", True, True),
        ("<class>rising</class><think>rises</think><extension>x</extension>", True, False),  # order
        ("<think>a <class>rising</class></think><extension>x</extension>", True, False),  # nested
        ("<think>a</think><class>rising</class><class>falling</class><extension>x</extension>", True, False),
        ("<think> </think><class>rising</class><extension>x</extension>", True, False),  # empty reasoning
        ("<think>a</think><class></class><extension>x</extension>", False, False),  # empty class
        ("<think>a</think><class>rising</class>", True, True),  # the extension is optional (the main results)
        ("<think>a</think>rising", False, False),  # no <class> span
    ],
)
def test_format_reward_public_and_paper_rules(text, public, paper):
    """The public rule (the default) asks only for a <class> span naming a class; the paper's (`format_rule
    = "paper"`) checks nesting and order. Changed with issue 36: the paper's check was the only one."""
    taskset = get_taskset("trend")
    for rule, ok in (("public", public), ("paper", paper)):
        (fmt, *_), _ = rw.reward_functions(RewardConfig(reward="composite", format_rule=rule), taskset)
        assert fmt(final_message=[text], category=["trend"], gold=['"rising"'], score=[0.0]) == [float(ok)], rule


def test_hard_reward_compares_the_class_and_soft_is_gated_on_it():
    taskset = get_taskset("anomalyxl")
    functions, weights = rw.reward_functions(RewardConfig(reward="composite", judge="openai/x"), taskset)
    assert weights == [0.1, 0.9, 0.5]  # a judge turns the soft weight on (TimeMaster's public code: 0.5)
    gold = json.dumps({"present": True, "start": 10, "end": 20, "_L": 100})
    texts = [
        '<think>a bump</think><class>{"present": true, "start": 12, "end": 18}</class><extension>x</extension>',
        '<think>flat</think><class>{"present": false}</class><extension>x</extension>',
        '{"present": true, "start": 12, "end": 18}',
    ]
    columns = {
        "final_message": texts,
        "category": [lb.LOCALIZE] * 3,
        "gold": [gold] * 3,
        "score": [0.6, 0.0, 0.6],
        "judge_score": [0.5, 0.9, None],
    }
    fmt, hard, soft = (fn(prompts=["k"] * 3, completions=None, **columns) for fn in functions)
    assert fmt == [1.0, 1.0, 0.0] and hard == [1.0, 0.0, 0.0] and soft == [0.5, 0.0, 0.0]
    assert rw.weighted_total(functions, weights, ["k"] * 3, columns) == pytest.approx([0.1 + 0.9 + 0.25, 0.1, 0.0])
    assert RewardConfig(reward="composite").soft == 0.0 and RewardConfig(judge="j", soft_weight=0.3).soft == 0.3


# -- curriculum and task stream ------------------------------------------------------------------
def test_curriculum_withholds_anomaly_free_cases_during_the_warm_steps():
    cfg = GRPOConfig()
    assert cfg.warm_steps == 220 and build(GRPOConfig, {"steps": 30}).warm_steps == 22
    assert build(GRPOConfig, {"steps": 400, "warm_steps": 220}).warm_steps == 220
    warm, after = generator_config(220, 220), generator_config(221, 220)
    assert (warm.p_present, warm.min_k) == (1.0, 1) and (after.p_present, after.min_k) == (0.8, 0)


def test_task_stream_is_fresh_every_step_and_reproducible():
    def stream(seed: int):
        return build(
            GRPOConfig, {"preset": "small", "steps": 3, "warm_steps": 2, "batch_size": 32, "seed": seed}
        ).training_stream()

    keys = task_keys(3, 4)
    assert keys[:2] == ["step-000001/task-00", "step-000001/task-01"] and len(keys) == 12
    assert parse_key(task_key(12, 3)) == (12, 3)
    samples = [stream(0).sample(*parse_key(k)) for k in keys]
    assert len({s.ref.id for s in samples}) == 12 and all(s.columns["split"] == "train" for s in samples)
    assert [stream(0).sample(*parse_key(k)).gold for k in keys] == [s.gold for s in samples]
    first = stream(1).sample(1, 0)
    assert first.gold != samples[0].gold or not (first.task.values == samples[0].task.values).all()


# -- masks ---------------------------------------------------------------------------------------
def test_masks_over_a_three_turn_transcript():
    turns = [
        Turn([1, 2, 3], [10, 11], [-0.1, -0.2]),
        Turn([1, 2, 3, 10, 11, 7, 8], [12], [-0.3]),  # 7, 8: template glue and an observation
        Turn([1, 2, 3, 10, 11, 7, 8, 12, 9], [13, 14], [-0.4, -0.5]),
    ]
    prompt, completion, mask, logprobs = assemble(turns)
    assert prompt == [1, 2, 3]
    assert completion == [10, 11, 7, 8, 12, 9, 13, 14]
    assert mask == [1, 1, 0, 0, 1, 0, 1, 1]
    assert logprobs == [-0.1, -0.2, 0.0, 0.0, -0.3, 0.0, -0.4, -0.5]
    assert assemble(turns[:1] + [Turn([1, 2, 3, 10, 11], [5], None)])[3] is None  # a turn without logprobs
    with pytest.raises(ValueError, match="does not extend"):
        assemble([turns[0], Turn([1, 2, 4, 10], [5], None)])


# -- configs, presets, resume --------------------------------------------------------------------
def test_defaults_are_the_papers():
    cfg = GRPOConfig()
    assert (cfg.max_steps, cfg.group_size, cfg.batch_size, cfg.tasks_per_step, cfg.max_seq_len) == (
        300,
        8,
        128,
        16,
        65536,
    )
    assert (cfg.loss_type, cfg.reward_scaling, cfg.beta, cfg.epsilon, cfg.learning_rate, cfg.policy.lora) == (
        "dr_grpo",
        "none",
        0.0,
        0.2,
        1e-6,
        0,
    )
    assert (cfg.rewards.lambda_tok, cfg.rewards.lambda_fail, cfg.harness_config.max_turns) == (0.1, 0.25, 15)
    assert (cfg.temperature, cfg.harness_config.max_tokens) == (1.0, 4096)
    assert build(GRPOConfig, {"loss": "grpo"}).reward_scaling == "group"
    assert cfg.episode_tokens() == 61440  # Dr. GRPO's constant normaliser: 15 replies x 4096, under 64k
    sft = SFTConfig()
    assert (sft.policy.lora, sft.policy.lora_alpha, sft.policy.lora_target, sft.epochs, sft.lr) == (
        16,
        32,
        "q_proj,v_proj",
        5,
        1e-4,
    )


def test_nested_settings_keep_their_own_defaults():
    cfg = build(GRPOConfig, {"max_turns": 3, "engine": "vllm-server", "judge": "x", "reward": "composite"})
    assert cfg.harness_config.max_turns == 3 and cfg.episode_setup()[1].temperature == 1.0  # TRL's, not eval's None
    assert cfg.rollout.engine == "vllm-server" and cfg.rewards.soft == 0.5  # with a judge: the public code's weight


def test_training_plays_memory_through_the_wrapper_or_refuses_it_for_a_harness_without_memory():
    """A memory bank in train-grpo is never silently ignored: a harness with the memory capability is
    played inside TimeClaw's wrapper with its own settings class (test_train_grpo shows the prefix in
    the policy's prompt); one without it (file-agent) is refused before anything loads."""
    from tsbench.harness.tools import ToolsSettings
    from tsbench.timeclaw.memory_wrapper import Remembering

    bank = {"model": "local/smollm2-135m", "memory": {"memory_bank": "bank.parquet", "top_k": 2}}
    harness, settings = build(GRPOConfig, {**bank, "harness": "tools"}).episode_setup()
    assert isinstance(harness, Remembering) and harness.memory_settings.top_k == 2
    assert type(settings) is ToolsSettings and settings.temperature == 1.0  # TRL's temperature, its own class
    plain, _ = build(GRPOConfig, {"model": "local/smollm2-135m", "harness": "tools"}).episode_setup()
    assert not isinstance(plain, Remembering)
    problems = build(GRPOConfig, {**bank, "harness": "file-agent"}).harness_problems()
    assert len(problems) == 1 and problems[0].startswith(
        "memory_bank (--memory-bank) is a setting of [memory], which harness file-agent does not have "
        "(it is read by single-pass-text, single-pass-image, rlm, rlm-image, tools, tools-image); top_k "
    )
    shadowed = build(GRPOConfig, {"model": "local/smollm2-135m", "memory_bank": "bank.parquet", "top_k": 2})
    assert shadowed.derived_problems() == [  # [grpo] top_k is TRL's: refused, never memory's silently
        "top_k is set by tsbench from plain temperature sampling; set that instead "
        "(the precedents a memory bank retrieves are [grpo.memory] top_k)"
    ]


def test_presets_load_with_the_papers_settings():
    timerlm = build(GRPOConfig, read_toml_table(ROOT / "experiments/grpo/timerlm_qwen3.5-4b.toml", "grpo"))
    assert (timerlm.policy.model, timerlm.group_size, timerlm.batch_size, timerlm.loss_type, timerlm.warm_steps) == (
        "Qwen/Qwen3.5-4B",
        8,
        128,
        "dr_grpo",
        220,
    )
    timerlm.validate(8)
    master = build(GRPOConfig, read_toml_table(ROOT / "experiments/timemaster/cpu_smoke.toml", "grpo"))
    assert (master.group_size, master.beta, master.epsilon, master.loss_type, master.rewards.reward) == (
        5,
        0.001,
        0.2,
        "grpo",
        "composite",
    )
    assert (master.rewards.format_weight, master.rewards.hard_weight, master.rewards.soft) == (0.1, 0.9, 0.0)
    master.validate(master.launch.num_processes)  # the GPU config: tests/test_timemaster_configs.py
    with_judge = build(
        GRPOConfig,
        {**read_toml_table(ROOT / "experiments/timemaster/cpu_smoke.toml", "grpo"), "judge": "openai/gpt-4o"},
    )
    assert with_judge.rewards.soft == 0.5  # the public code's judge weight
    for name in ("cpu_smoke", "gpu_smoke", "vllm_server"):
        cfg = build(GRPOConfig, read_toml_table(ROOT / f"experiments/grpo/{name}.toml", "grpo"))
        cfg.validate(cfg.launch.num_processes)
    for path in sorted((ROOT / "experiments/sft").glob("*.toml")):
        sft = build(SFTConfig, read_toml_table(path, "sft"))
        assert (sft.policy.lora, sft.policy.lora_target, sft.epochs, sft.warmup) == (16, "q_proj,v_proj", 5, 0.03)


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"group_size": 1}, "group-size"),
        ({"batch_size": 12}, "whole groups"),
        ({"micro_batch_size": 3}, "micro-batch"),
        ({"reward": "composite", "soft_weight": 1.0}, "needs --judge"),
        ({"judge": "x"}, "composite"),
        ({"categories": ["presence"]}, "MCQ"),
        ({"loss": "ppo"}, "--loss"),
        ({"engine": "tpu"}, "--engine"),
        ({"harness": "direct"}, "model harness"),
        ({"temperature": 0.0}, "temperature"),
        ({"model": ""}, "--model"),
        ({"depth": 1}, "depth 0"),
        ({"epsilon_high": 0.1}, "epsilon_high"),
        ({"importance_sampling": "sequence"}, "importance_sampling"),
        ({"num_generations": 4}, "num_generations is set by tsbench from group_size"),
        ({"harness_config": {"temperature": 0.5}}, "TRL's temperature"),
        ({"max_tokens": 8, "top_k": 2}, "unknown key top_k|top_k is set by tsbench|top_k"),
        ({"dtype": "bfloat16"}, "float32 master weights"),
        ({"refill_rounds": -1}, "refill_rounds"),
    ],
)
def test_bad_settings_are_one_line_errors(changes, needle):
    with pytest.raises(UserError, match=needle) as caught:
        build(GRPOConfig, {"model": "local/x", **changes}).validate()
    assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match="unknown"):
        build(GRPOConfig, {"kl_beta": 0.1})


def test_resume_refuses_a_moved_curriculum(tmp_path):
    out = tmp_path / "run"
    cfg = build(GRPOConfig, {"model": "local/x", "steps": 300, "out": str(out), "resume": True})
    assert prepare_run_dir(cfg, out, True) is None
    (out / "checkpoints" / "checkpoint-5").mkdir(parents=True)
    (out / "checkpoints" / "checkpoint-5" / "trainer_state.json").write_text("{}")
    with pytest.raises(UserError, match=r"warm_steps 220 -> 293"):
        prepare_run_dir(
            build(GRPOConfig, {"model": "local/x", "steps": 400, "out": str(out), "resume": True}), out, True
        )
    pinned = build(GRPOConfig, {"model": "local/x", "steps": 400, "warm_steps": 220, "out": str(out), "resume": True})
    assert prepare_run_dir(pinned, out, True).name == "checkpoint-5"  # more steps, same cut-over: fine
    with pytest.raises(UserError, match="--resume"):
        prepare_run_dir(build(GRPOConfig, {"model": "local/x", "out": str(out)}), out, True)


def test_a_fresh_start_clears_only_what_an_aborted_run_of_ours_left(tmp_path):
    """--out naming a folder of the user's that holds a `rollouts` folder: refused, nothing deleted."""
    out = tmp_path / "mine"
    (out / "rollouts").mkdir(parents=True)
    (out / "rollouts" / "notes.txt").write_text("mine")
    cfg = build(GRPOConfig, {"model": "local/x", "out": str(out)})
    with pytest.raises(UserError, match="not a GRPO run dir"):
        prepare_run_dir(cfg, out, True)
    assert (out / "rollouts" / "notes.txt").read_text() == "mine"
    (out / "train.json").write_text("{}")  # an aborted run of ours: its journal goes
    assert prepare_run_dir(cfg, out, True) is None
    assert not (out / "rollouts").exists()
    other = tmp_path / "other"
    (other / "warm_start").mkdir(parents=True)  # the adapter fold replaces a warm_start/ it did not finish
    with pytest.raises(UserError, match="holds warm_start"):
        prepare_run_dir(build(GRPOConfig, {"model": "local/x", "out": str(other)}), other, True)


def test_resume_refuses_the_other_format_rule(tmp_path):
    """A composite run read its replies under one format rule; resuming it under the other would change its reward."""
    out = tmp_path / "run"
    composite = {"model": "local/x", "reward": "composite", "out": str(out), "resume": True}
    assert prepare_run_dir(build(GRPOConfig, composite), out, True) is None  # records the public rule
    (out / "checkpoints" / "checkpoint-1").mkdir(parents=True)
    (out / "checkpoints" / "checkpoint-1" / "trainer_state.json").write_text("{}")
    with pytest.raises(UserError, match=r"format_rule 'public' -> 'paper'"):
        prepare_run_dir(build(GRPOConfig, {**composite, "format_rule": "paper"}), out, True)
    assert prepare_run_dir(build(GRPOConfig, composite), out, True).name == "checkpoint-1"


def test_sft_warmup_rounds_down():
    assert warmup_steps(0.03, 1) == 0 and warmup_steps(0.03, 100) == 3 and warmup_steps(0.5, 3) == 1


def test_launch_command_runs_this_command_under_accelerate():
    from tsbench.train.config import LaunchConfig
    from tsbench.train.launch import launch_command

    command = launch_command(
        LaunchConfig(4, str(ROOT / "experiments/grpo/accelerate/zero3.yaml")), ["train-grpo", "--config", "x.toml"]
    )
    assert command[1:6] == ["-m", "accelerate.commands.launch", "--num_processes", "4", "--config_file"]
    assert command[-5:] == ["-m", "tsbench.cli", "train-grpo", "--config", "x.toml"]
    with pytest.raises(UserError, match="accelerate config"):
        launch_command(LaunchConfig(2, "nope.yaml"), [])


def test_batches_are_rounds_of_the_live_episodes_whatever_the_timing():
    """With fewer workers than episodes and random pauses between turns (the sandbox), every batch
    is one round of the episodes alive at that point, so two runs batch identically."""
    import random
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from tsbench.train.backends import Reply, Request
    from tsbench.train.batcher import Batcher

    def run(pause_seed: int) -> list[list[tuple[int, int]]]:
        batches: list[list[tuple[int, int]]] = []

        class Recorder:
            def generate(self, requests):
                batches.append([(r.seed // 100, r.seed % 100) for r in requests])
                return [Reply([r.seed]) for r in requests]

        batcher = Batcher(Recorder(), episodes=6, workers=3)
        pauses = random.Random(pause_seed)
        lock = threading.Lock()

        def episode(e: int) -> None:
            with batcher.episode():
                for turn in range(1 + e % 3):  # episodes of 1, 2 or 3 turns
                    with lock:
                        pause = pauses.random() * 0.02
                    time.sleep(pause)
                    assert batcher.generate(Request([e], 1, 1.0, 100 * e + turn)).ids == [100 * e + turn]

        with ThreadPoolExecutor(3) as pool:
            list(pool.map(episode, range(6)))
        return batches

    first = run(1)
    assert first == run(2) and sum(len(b) for b in first) == 1 + 2 + 3 + 1 + 2 + 3
    assert first[0] == [(0, 0), (1, 0), (2, 0)]


def test_cli_flags_override_the_preset_and_bad_ones_are_one_line_errors():
    import sys

    res = readiness.run(
        [
            sys.executable,
            "-m",
            "tsbench.cli",
            "train-grpo",
            "--config",
            str(ROOT / "experiments/timemaster/cpu_smoke.toml"),
            "--soft-weight",
            "1",
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "needs --judge" in res.stderr


# -- what reaches TRL and the GPU-only paths that can be checked here ----------------------------
def test_every_vllm_batch_has_a_logprob_per_token_and_unsampled_episodes_leave_the_loss():
    """An episode that never generated (a jail that did not start, a prompt over max_seq_len) has no
    sampler logprobs; TRL's importance-sampling correction needs a list for every row."""
    from tsbench.train.rollouts import Row, sampler_logprobs

    played = Row([1, 2], [5, 6, 7], [1, 0, 1], [-0.5, 0.0, -1.0])
    failed = Row([1, 2], [2], [0], None)  # rollouts.Environment.sequence's stand-in end token
    cut = Row([1, 2], [5, 6], [1, 1], None)  # generated, but the server sent no logprobs
    logprobs, masks = sampler_logprobs([played, failed, cut], wanted=True)
    assert logprobs == [[-0.5, 0.0, -1.0], [0.0], [0.0, 0.0]]
    assert masks == [[1, 0, 1], [0], [0, 0]]
    assert cut.env_mask == [1, 1]  # the function is pure
    assert sampler_logprobs([played, failed], wanted=False) == (None, [[1, 0, 1], [0]])  # hf: no correction


def test_episodes_that_never_generated_get_advantage_0_and_leave_their_groups_baseline():
    """A policy failure before the first reply (a prompt over max_seq_len: score 0, forced final) has no token
    to credit; like an infrastructure failure it reaches TRL with no reward, so TRL's nan-aware group mean and
    std (trl/trainer/grpo_trainer.py, `unscorable_mask`) leave it out and its advantage is 0."""
    import torch
    from trl.trainer.utils import nanstd

    from tsbench.train.rollouts import Environment, Episode

    def episode(index, score, tokens, forced=False):
        return Episode(
            "k",
            index,
            {"category": "localize", "gold": "{}"},
            score=score,
            forced_final=forced,
            generated_tokens=tokens,
        )

    group = [
        episode(0, 1.0, 10),
        episode(1, 0.0, 20, forced=True),  # generated, then hit a wall: keeps its forced-final penalty
        episode(2, 0.0, 0, forced=True),  # the policy's failure before generating (prompt over max_seq_len)
        episode(3, None, 0),  # an infrastructure failure
        episode(4, 0.5, 40),
    ]
    keys = ["k"] * len(group)
    functions, weights = rw.reward_functions(RewardConfig(), taskset=None)
    totals = rw.weighted_total(functions, weights, keys, Environment.columns(group))
    assert totals[2] is None and totals[3] is None
    played = rw.penalised_rewards([1.0, 0.0, 0.5], [10, 20, 40], [False, True, False])
    assert [totals[i] for i in (0, 1, 4)] == pytest.approx([p.reward for p in played])

    # TRL 1.16's advantage, sum_then_normalize: unscorable rows NaN, nanmean / nanstd per group, NaN -> 0
    rewards = torch.tensor([float("nan") if t is None else t for t in totals])
    for scale in (False, True):
        advantages = rewards - torch.nanmean(rewards)
        if scale:
            advantages = advantages / (nanstd(rewards) + 1e-4)
        advantages = torch.nan_to_num(advantages, nan=0.0).tolist()
        kept = torch.tensor([p.reward for p in played])
        alone = (kept - kept.mean()) / ((kept.std() + 1e-4) if scale else 1.0)
        assert advantages[2] == 0.0 and advantages[3] == 0.0
        assert [advantages[i] for i in (0, 1, 4)] == pytest.approx(alone.tolist(), abs=1e-6)
    assert rw.zero_variance(totals, keys) == [False] * 5
    assert rw.zero_variance(totals[1:4], keys[1:4]) == [True] * 3  # one scored rollout left: no signal


def test_rewarded_scores_drop_only_rollouts_without_a_generated_token():
    assert rw.rewarded_scores([1.0, 0.0, 0.0, None, 0.3], [5, 1, 0, 7, 0]) == [1.0, 0.0, None, None, None]
    with pytest.raises(ValueError):
        rw.rewarded_scores([1.0], [])


def test_clip_and_importance_sampling_settings_reach_trl(tmp_path):
    """GRPOConfig is TRL's config: what a run sets is what TRL reads, after TRL's own checks (for_launch)."""

    def args(**changes):
        cfg = build(GRPOConfig, {"model": "local/x", "out": str(tmp_path / "run"), **changes})
        return cfg.for_launch(world=1, rows=1, on_gpu=False, reward_weights=[1.0, 0.1, 0.25])

    default = args()
    assert (default.vllm_importance_sampling_mode, default.vllm_importance_sampling_clip_max) == ("token_truncate", 3.0)
    assert default.vllm_importance_sampling_correction and default.epsilon_high is None  # TRL: epsilon
    chosen = args(epsilon_high=0.28, importance_sampling="sequence_mask", importance_sampling_cap=2.0)
    assert (chosen.epsilon_high, chosen.vllm_importance_sampling_mode, chosen.vllm_importance_sampling_clip_max) == (
        0.28,
        "sequence_mask",
        2.0,
    )
    assert not args(vllm_importance_sampling_correction=False).vllm_importance_sampling_correction
    # every TRL option is a key: one TRL's own __post_init__ reads, and one only its trainer reads
    assert args(steps_per_generation=None, ds3_gather_for_generation=False).ds3_gather_for_generation is False
    assert args(top_entropy_quantile=0.5).top_entropy_quantile == 0.5
    launched = args(group_size=4, batch_size=8, micro_batch_size=2, max_turns=3, max_tokens=10)
    assert (launched.num_generations, launched.gradient_accumulation_steps, launched.max_completion_length) == (
        4,
        4,
        30,
    )
    assert launched.generation_batch_size == 8 and launched.output_dir == str(tmp_path / "run" / "checkpoints")
    rendered = args(group_size=4, batch_size=8, micro_batch_size=2, max_turns=3, max_tokens=10).trl_values(
        world=2, rows=3, on_gpu=True, reward_weights=[1.0]
    )
    assert (
        rendered["num_generations"],
        rendered["gradient_accumulation_steps"],
        rendered["max_completion_length"],
    ) == (
        12,
        6,
        10,
    )
    assert rendered["model_init_kwargs"] == {"dtype": "bfloat16"}  # the KL reference of a full run, in bf16


def test_fsdp_writes_the_final_model_as_one_full_state_dict():
    """Sharded checkpoints, but `final/` must be a directory `local/<run>/final` loads."""
    from types import SimpleNamespace

    from accelerate.utils import FullyShardedDataParallelPlugin

    from tsbench.train.grpo import full_state_dict_at_save

    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, state_dict_type="SHARDED_STATE_DICT")
    full_state_dict_at_save(SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin)))
    assert "FULL_STATE_DICT" in str(plugin.state_dict_type) and "Full" in type(plugin.state_dict_config).__name__
    full_state_dict_at_save(SimpleNamespace(state=SimpleNamespace()))  # no FSDP: nothing to do
    yaml = (ROOT / "experiments/grpo/accelerate/fsdp.yaml").read_text()
    assert "fsdp_state_dict_type: SHARDED_STATE_DICT" in yaml  # what the checkpoints use


def test_gpu_extra_pins_vllm_to_the_range_trl_supports_and_deepspeed_has_an_extra():
    import re
    import tomllib

    import trl
    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    source = (Path(trl.__file__).parent / "import_utils.py").read_text()
    low, high = re.search(r'Version\("([\d.]+)"\) <= _vllm_base_version <= Version\("([\d.]+)"\)', source).groups()
    vllm = next(Requirement(r) for r in extras["gpu"] if Requirement(r).name == "vllm")
    major, minor = (int(x) for x in low.split(".")[:2])
    assert vllm.specifier.contains(low) and vllm.specifier.contains(high)
    assert not vllm.specifier.contains(f"{major}.{minor - 1}.0")
    assert not vllm.specifier.contains(".".join([*high.split(".")[:2], "1"]))
    assert any(Requirement(r).name == "deepspeed" for r in extras["deepspeed"])


def test_server_errors_are_retried_a_bounded_number_of_times_then_raised():
    """TRL's vLLM client raises a bare Exception on a 400 (it retries only 5xx); the retry wrapper tries
    again, then raises, and the Batcher keeps the failure so the rollout stops instead of training on
    a batch of infrastructure failures."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import requests

    from tsbench.train.backends import BackendError, Request, with_retries
    from tsbench.train.batcher import Batcher

    hits = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            hits.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status = 400 if len(hits) <= int(self.path.strip("/")) else 200
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def post(fails: int):
        response = requests.post(f"{base}/{fails}", json={"prompts": [[1]]}, timeout=5)
        if response.status_code != 200:  # what trl.generation.vllm_client.VLLMClient does
            raise Exception(f"Request failed: {response.status_code}, {response.text}")
        return response.status_code

    try:
        assert with_retries(lambda: post(2), attempts=3, wait_s=0.01) == 200 and len(hits) == 3
        hits.clear()
        with pytest.raises(BackendError, match="failed 3 times.*400"):
            with_retries(lambda: post(5), attempts=3, wait_s=0.01)
        assert len(hits) == 3
    finally:
        server.shutdown()
        server.server_close()

    class Down:
        def generate(self, requests):
            raise BackendError("the vLLM server failed 3 times")

    batcher = Batcher(Down(), episodes=1, workers=1)
    with batcher.episode(), pytest.raises(BackendError):
        batcher.generate(Request([1], 1, 1.0, 0))
    assert isinstance(batcher.failure, BackendError)


def test_a_vllm_servers_numbers_are_read_without_trust():
    """TRL's vllm-serve answer: logprobs feed the sampler correction, ids the loss. A NaN, an infinity,
    a positive logprob, a string or a bool drops that reply's logprobs (it then weighs nothing); ids
    that are no token ids, or too few completions, stop the step."""
    from tsbench.train.backends import BackendError, server_replies

    good = [[-0.5], [-1.25]]
    replies = server_replies({"completion_ids": [[5, 6], [7, 8]], "logprobs": [good, [[-0.1], [float("nan")]]]}, 2)
    assert [r.ids for r in replies] == [[5, 6], [7, 8]]
    assert replies[0].logprobs == [-0.5, -1.25] and replies[1].logprobs is None
    for bad in (float("inf"), 3.0, "-0.5", True, None):
        assert server_replies({"completion_ids": [[5, 6]], "logprobs": [[[-0.5], [bad]]]}, 1)[0].logprobs is None
    assert server_replies({"completion_ids": [[5, 6]], "logprobs": [[[-0.5]]]}, 1)[0].logprobs is None  # too few
    assert server_replies({"completion_ids": [[5]]}, 1)[0].logprobs is None  # none sent: none used
    for out in ({"completion_ids": [[5, -1]]}, {"completion_ids": [[5, True]]}, {"completion_ids": [[5.0]]},
                {"completion_ids": [[5]]}, {"completion_ids": "x"}, []):  # fmt: skip
        with pytest.raises(BackendError):
            server_replies(out, 2 if out == {"completion_ids": [[5]]} else 1)


def test_a_rank_that_can_outplay_the_group_timeout_is_refused_and_one_that_cannot_is_not():
    # 16 episodes per process, 8 at a time: two waves of at most 1000 s, then the gather
    slow = {"model": "local/x", "batch_size": 128, "rollout_workers": 8, "episode_wall_s": 1000}
    with pytest.raises(UserError, match=r"2,000 s on one process.*ddp_timeout 1,800") as caught:
        build(GRPOConfig, slow).validate(world_size=8)
    assert "\n" not in str(caught.value)
    fits = build(GRPOConfig, {**slow, "ddp_timeout": 2200})
    assert fits.rollout_bound_s(8) == 2000 and fits.timeout_problems(8) == []
    refills = build(GRPOConfig, {**slow, "ddp_timeout": 2200, "refill_rounds": 1})
    assert refills.rollout_bound_s(8) == 4000 and refills.timeout_problems(8)  # each refill round plays again
    assert build(GRPOConfig, {**slow, "episode_wall_s": None}).rollout_bound_s(8) is None
    assert build(GRPOConfig, slow).timeout_problems(1) == []  # one process waits for no one


def test_a_std_over_turn_rows_is_refused_and_dr_grpo_is_not():
    grpo = build(GRPOConfig, {"model": "local/x", "loss": "grpo"})
    assert grpo.reward_scaling == "group" and grpo.scaling_problems(1) == []
    assert "std over the rows" in grpo.scaling_problems(15)[0]
    assert build(GRPOConfig, {"model": "local/x"}).scaling_problems(15) == []  # dr_grpo divides by no std
