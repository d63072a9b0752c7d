"""The pure parts of GRPO, hand-computed: rewards, advantages, masks, loss, curriculum, task stream, config."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from tsbench.tasks.anomalyxl import labels as lb
from tsbench.core.errors import UserError
from tsbench.train import rewards as rw
from tsbench.train.advantages import batch_advantages, group_advantages
from tsbench.train.curriculum import generator_config, in_warm_phase, sample_tasks, warm_steps
from tsbench.train.grpo import GRPOConfig, Sample, dummy_batch, load_grpo_config, micro_batches
from tsbench.train.loss import clipped_surrogate, gather_logprobs, token_weight
from tsbench.train.rollouts import assemble_sequence

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments" / "grpo"


# -- penalised reward --------------------------------------------------------------------------
def test_penalised_reward_by_hand():
    parts = rw.penalised_rewards([1.0, 0.5, 0.0, 1.0], [100, 200, 400, 50], [False, False, True, True])
    assert [p.kappa for p in parts] == [0.25, 0.5, 1.0, 0.125]
    expected = [1 - 0.1 * 0.25, 0.5 - 0.1 * 0.5 * 0.5, 0.0 - 0.25, 1 - 0.1 * 0.125 - 0.25]
    assert [p.reward for p in parts] == pytest.approx(expected)
    # the most verbose rollout failed (s = 0): no token cost for it, only the forced-final penalty
    assert parts[2].token_penalty == 0.0 and parts[2].fail_penalty == 0.25
    assert parts[3].token_penalty == pytest.approx(0.0125) and parts[3].fail_penalty == 0.25


def test_token_cost_is_relative_to_the_group_and_weights_are_settable():
    assert rw.token_costs([0, 0]) == [0.0, 0.0]
    parts = rw.penalised_rewards([0.8, 0.8], [10, 40], [False, False], lambda_tok=0.5, lambda_fail=0.0)
    assert [p.reward for p in parts] == pytest.approx([0.8 - 0.5 * 0.8 * 0.25, 0.8 - 0.5 * 0.8])
    with pytest.raises(ValueError):
        rw.penalised_rewards([1.0], [1, 2], [False])


# -- advantages ------------------------------------------------------------------------------
def test_dr_grpo_and_grpo_advantages_by_hand():
    dr = group_advantages([1.0, 0.0, 0.0, 1.0], "dr-grpo")
    assert dr.advantages == [0.5, -0.5, -0.5, 0.5] and not dr.dropped
    tm = group_advantages([1.0, 0.0, 0.0, 1.0], "grpo")
    assert tm.std == pytest.approx(0.5)
    assert tm.advantages == pytest.approx([1.0, -1.0, -1.0, 1.0], abs=1e-5)
    uneven = group_advantages([0.975, 0.475, -0.25, 0.7375], "dr-grpo")
    mean = (0.975 + 0.475 - 0.25 + 0.7375) / 4
    assert uneven.advantages == pytest.approx([0.975 - mean, 0.475 - mean, -0.25 - mean, 0.7375 - mean])
    assert sum(uneven.advantages) == pytest.approx(0.0, abs=1e-12)


def test_zero_variance_groups_are_dropped():
    flat = group_advantages([0.3, 0.3, 0.3], "grpo")
    assert flat.dropped and flat.advantages == [0.0, 0.0, 0.0]
    results = batch_advantages([[0.0, 0.0], [0.0, 1.0], [-0.25, -0.25]])
    assert [r.dropped for r in results] == [True, False, True]
    with pytest.raises(ValueError):
        group_advantages([1.0, 0.0], "ppo")


# -- masks -----------------------------------------------------------------------------------
def test_masks_over_a_three_turn_transcript():
    system_and_task = [1, 2, 3]
    reply1, observation1 = [10, 11], [20, 21]
    reply2, observation2 = [12], [30]
    reply3 = [13, 14]
    turns = [
        (system_and_task, reply1),
        (system_and_task + reply1 + observation1, reply2),
        (system_and_task + reply1 + observation1 + reply2 + observation2, reply3),
    ]
    ids, mask = assemble_sequence(turns)
    assert ids == [1, 2, 3, 10, 11, 20, 21, 12, 30, 13, 14]
    assert mask == [0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1]
    assert [t for t, m in zip(ids, mask) if m] == reply1 + reply2 + reply3
    with pytest.raises(ValueError, match="turn 2"):
        assemble_sequence([(system_and_task, reply1), ([1, 2, 3, 99], reply2)])  # history re-tokenised
    assert assemble_sequence([]) == ([], [])


def test_micro_batches_pack_longest_first_within_the_token_budget():
    samples = [Sample([5] * n, [0] * (n - 2) + [1, 1], 0.5) for n in (10, 4, 6, 3)]
    batches = micro_batches(samples, 12, 0, "cpu")
    assert [b.ids.shape for b in batches] == [torch.Size([1, 10]), torch.Size([2, 6]), torch.Size([1, 3])]
    assert [b.counts for b in batches] == [[2], [2, 2], [2]]
    second = batches[1]
    assert second.attention[1].tolist() == [1, 1, 1, 1, 0, 0] and second.targets[1].tolist() == [0, 0, 1, 1, 0, 0]
    assert dummy_batch(0, "cpu").counts == [1]


# -- loss ------------------------------------------------------------------------------------
def test_clipped_surrogate_values_by_hand():
    logp = torch.log(torch.tensor([0.5, 0.9, 0.2]))
    old = torch.log(torch.tensor([0.4, 0.6, 0.4]))  # ratios 1.25, 1.5, 0.5
    adv = torch.tensor([1.0, 1.0, -1.0])
    w = torch.full((3,), 1 / 3)
    parts = clipped_surrogate(logp, old, adv, w, clip_eps=0.2)
    # min(1.25, 1.2) = 1.2; min(1.5, 1.2) = 1.2; min(-0.5, -0.8) = -0.8
    assert float(parts.loss) == pytest.approx(-(1.2 + 1.2 - 0.8) / 3)
    assert parts.clip_frac == pytest.approx(1.0)
    assert parts.ratio_mean == pytest.approx((1.25 + 1.5 + 0.5) / 3)
    # inside the trust region nothing is clipped
    inside = clipped_surrogate(torch.log(torch.tensor([0.44])), torch.log(torch.tensor([0.4])),
                               torch.tensor([2.0]), torch.tensor([1.0]))
    assert float(inside.loss) == pytest.approx(-2.2) and inside.clip_frac == 0.0


def test_clipped_tokens_carry_no_gradient_and_on_policy_gradient_is_minus_weighted_advantage():
    old = torch.log(torch.tensor([0.4, 0.6, 0.4]))
    logp = torch.log(torch.tensor([0.5, 0.5, 0.2])).requires_grad_()  # ratios 1.25 (clipped), 0.83, 0.5 (clipped)
    adv = torch.tensor([1.0, 1.0, -1.0])
    w = torch.tensor([0.5, 0.25, 0.25])
    clipped_surrogate(logp, old, adv, w).loss.backward()
    assert logp.grad[0] == 0.0 and logp.grad[2] == 0.0
    assert float(logp.grad[1]) == pytest.approx(-0.25 * (0.5 / 0.6))
    on_policy = torch.log(torch.tensor([0.3, 0.7])).requires_grad_()
    clipped_surrogate(on_policy, on_policy.detach(), torch.tensor([0.5, -1.5]), torch.tensor([0.5, 0.5])).loss.backward()
    assert on_policy.grad.tolist() == pytest.approx([-0.25, 0.75])


def test_kl_to_the_reference_is_the_k3_estimator():
    logp = torch.log(torch.tensor([0.8, 0.25]))
    ref = torch.log(torch.tensor([0.4, 0.25]))
    parts = clipped_surrogate(logp, logp.detach(), torch.zeros(2), torch.tensor([0.5, 0.5]),
                              ref_logprobs=ref, kl_beta=0.001)
    k3 = 0.5 - math.log(0.5) - 1  # exp(r) - r - 1 with r = log(0.4 / 0.8); the second token agrees
    assert parts.kl == pytest.approx(0.5 * k3)
    assert float(parts.loss) == pytest.approx(0.001 * 0.5 * k3)
    without = clipped_surrogate(logp, logp.detach(), torch.zeros(2), torch.tensor([0.5, 0.5]), ref_logprobs=ref)
    assert without.kl == 0.0


def test_token_weights_and_logprob_gather():
    assert token_weight(5, total_tokens=20, n_sequences=3) == 1 / 20
    assert token_weight(5, total_tokens=20, n_sequences=4, norm="sequence") == 1 / 20
    assert token_weight(2, total_tokens=20, n_sequences=4, norm="sequence") == 1 / 8
    with pytest.raises(ValueError):
        token_weight(1, total_tokens=1, n_sequences=1, norm="batch")
    logits = torch.tensor([[0.0, math.log(3.0)]])
    assert float(gather_logprobs(logits, torch.tensor([1]))) == pytest.approx(math.log(0.75))
    assert float(gather_logprobs(logits, torch.tensor([1]), temperature=2.0)) == pytest.approx(
        math.log(math.sqrt(3) / (1 + math.sqrt(3))))


# -- curriculum and tasks --------------------------------------------------------------------
def test_curriculum_withholds_anomaly_free_cases_for_220_of_300_steps():
    assert warm_steps(300) == 220
    assert in_warm_phase(1, 300) and in_warm_phase(220, 300) and not in_warm_phase(221, 300)
    warm, late = generator_config(220, 300), generator_config(221, 300)
    assert (warm.p_present, warm.min_k) == (1.0, 1)
    assert (late.p_present, late.min_k) == (0.8, 0)
    assert warm_steps(10, 0.5) == 5 and not in_warm_phase(1, 10, 0.0)
    small = generator_config(1, 2, preset_name="small", lengths=(1024,))
    assert small.single_lengths == small.multi_lengths == (1024,)


def test_task_stream_is_fresh_every_step_and_reproducible():
    gen = generator_config(1, 300, preset_name="small")
    step1 = sample_tasks(gen, lb.PRECISE_CATEGORIES, 1, 16, seed=3)
    step2 = sample_tasks(gen, lb.PRECISE_CATEGORIES, 2, 16, seed=3)
    ids = [p.id for p in step1 + step2]
    assert len(set(ids)) == 32  # no row repeats in a run
    assert [p.id for p in sample_tasks(gen, lb.PRECISE_CATEGORIES, 1, 16, seed=3)] == ids[:16]
    assert all(p.split == "train" and p.length in (1024, 2048) for p in step1)
    assert {p.category for p in step1 + step2} <= set(lb.PRECISE_CATEGORIES)
    # the warm phase: every localize task has an anomaly
    localize = sample_tasks(gen, (lb.LOCALIZE,), 5, 20, seed=3)
    assert all(p.gold["present"] for p in localize)


# -- TimeMaster composite reward --------------------------------------------------------------
GOOD = "<think>a jump at 300</think>\n<class>{\"present\": true, \"start\": 300, \"end\": 340}</class>\n<extension>check the sensor</extension>"


def test_format_reward_needs_three_ordered_non_empty_tags():
    assert rw.format_reward(GOOD) == 1.0
    assert rw.parse_tagged(GOOD).cls.startswith("{")
    broken = [
        GOOD.replace("<think>a jump at 300</think>", "<think> </think>"),  # empty reasoning
        GOOD.replace("<extension>", "").replace("</extension>", ""),  # missing part
        "<class>x</class><think>y</think><extension>z</extension>",  # wrong order
        "preamble " + GOOD,  # text outside the tags
        GOOD.replace("check the sensor", "<think>again</think>"),  # nested tag
    ]
    assert [rw.format_reward(b) for b in broken] == [0.0] * len(broken)


def test_hard_reward_is_an_exact_class_match():
    gold = {"present": True, "start": 10, "end": 20, "_L": 100}
    assert rw.hard_reward(lb.LOCALIZE, gold, '{"present": true, "start": 50, "end": 60}') == 1.0
    assert rw.hard_reward(lb.LOCALIZE, gold, '{"present": false}') == 0.0
    assert rw.hard_reward(lb.LOCALIZE, gold, "not json") == 0.0
    kind = {"kind": lb.LEVEL_SHIFT, "start": 1, "end": 5, "_L": 10}
    assert rw.hard_reward(lb.CLASSIFY, kind, '{"kind": "Level Shift", "start": 7, "end": 9}') == 1.0
    assert rw.hard_reward(lb.CLASSIFY, kind, '{"kind": "Transient Spike", "start": 1, "end": 5}') == 0.0
    assert rw.hard_reward(lb.PRESENCE, {"answer": "Yes"}, "Yes") == 1.0
    assert rw.gold_class(lb.MAGNITUDE, {"magnitude_sigma": 4.0}) == "3-10σ"


def test_composite_weights_and_soft_gate():
    assert rw.composite_reward(1.0, 1.0, 0.9).reward == pytest.approx(1.0)  # (0.1, 0.9, 0): soft ignored
    full = rw.composite_reward(1.0, 1.0, 0.5, (0.1, 0.9, 1.0))
    assert full.reward == pytest.approx(1.5) and full.soft == 0.5
    wrong_class = rw.composite_reward(1.0, 0.0, 0.9, (0.1, 0.9, 1.0))
    assert wrong_class.reward == pytest.approx(0.1) and wrong_class.soft == 0.0
    assert rw.parse_judge_scores('{"specificity": 1, "appropriateness": 0.5, "relevance": 0.5, "depth": 0}') == 0.5
    assert rw.parse_judge_scores("0.625") == 0.625
    assert rw.parse_judge_scores("score: 7") == 1.0  # clipped to [0, 1]
    assert rw.parse_judge_scores("no idea") is None
    assert "specificity" in rw.judge_prompt(rw.parse_tagged(GOOD))


# -- config ----------------------------------------------------------------------------------
def test_config_defaults_are_the_papers_and_batch_counts_rollouts():
    cfg = GRPOConfig(model="Qwen/Qwen3.5-4B")
    cfg.validate()
    assert (cfg.steps, cfg.group_size, cfg.batch_size, cfg.max_turns, cfg.max_seq_len) == (300, 8, 128, 15, 65536)
    assert (cfg.lambda_tok, cfg.lambda_fail, cfg.clip_eps, cfg.kl_beta, cfg.advantage) == (0.1, 0.25, 0.2, 0.0, "dr-grpo")
    assert cfg.tasks_per_step == 16 and cfg.curriculum_fraction == pytest.approx(220 / 300)
    assert cfg.categories == lb.PRECISE_CATEGORIES and cfg.lengths is None and not cfg.use_lora


@pytest.mark.parametrize("changes, needle", [
    ({"model": ""}, "--model"),
    ({"lora": 8, "full": True}, "not both"),
    ({"batch_size": 12}, "multiple of --group-size"),
    ({"group_size": 1, "batch_size": 4}, "--group-size"),
    ({"advantage": "ppo"}, "--advantage"),
    ({"reward": "composite", "composite_weights": (0.1, 0.9, 1.0)}, "--judge"),
    ({"rollout_engine": "sglang"}, "--rollout-engine"),
    ({"categories": ("presence",)}, "MCQ"),
])
def test_config_rejects_bad_settings(changes, needle):
    with pytest.raises(UserError, match=needle):
        GRPOConfig(**{"model": "local/smollm2-135m", **changes}).validate()


def test_experiment_files_load():
    paper = load_grpo_config(EXPERIMENTS / "paper_qwen3.5-4b.toml")
    paper.validate()
    assert paper.model == "Qwen/Qwen3.5-4B" and paper.full and paper.lora is None
    assert (paper.steps, paper.group_size, paper.batch_size, paper.max_seq_len) == (300, 8, 128, 65536)
    smoke = load_grpo_config(EXPERIMENTS / "smoke_1gpu.toml", steps=3)
    smoke.validate()
    assert smoke.steps == 3 and smoke.rollout_engine == "vllm" and smoke.lora


def test_config_file_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[grpo]\nmodel = "x"\nsteps = 3\nwarp = 9\n')
    with pytest.raises(UserError, match="warp"):
        load_grpo_config(bad)
    with pytest.raises(UserError, match="no such file"):
        load_grpo_config(tmp_path / "missing.toml")
    good = tmp_path / "good.toml"
    good.write_text('model = "local/smollm2-135m"\nlora = 4\ncategories = ["localize"]\nlengths = [1024]\n')
    cfg = load_grpo_config(good)
    assert cfg.categories == ("localize",) and cfg.lengths == (1024,)


# -- scoring rollouts and assigning rewards ---------------------------------------------------
class _Judge:
    name = "stub/judge"

    def __init__(self):
        self.prompts = []

    def generate(self, messages, *, max_tokens=None, temperature=None, task=None):
        from tsbench.models.base import Completion

        self.prompts.append(messages[-1].content)
        return Completion('{"specificity": 1, "appropriateness": 1, "relevance": 0.5, "depth": 0.5}')

    def close(self):
        pass


def _localize_plan():
    return sample_tasks(generator_config(1, 10, preset_name="small"), (lb.LOCALIZE,), 1, 1, seed=0)[0]


def test_score_rollout_and_rewards_for_both_reward_kinds():
    import json

    from tsbench.harness import HarnessConfig
    from tsbench.train.grpo import assign_rewards
    from tsbench.train.rollouts import Rollout, RolloutSettings, episode_task, score_rollout

    plan = _localize_plan()
    answer = json.dumps({"present": True, "start": plan.gold["start"], "end": plan.gold["end"]})
    tagged = f"<think>a clear step</think><class>{answer}</class><extension>inspect the sensor log</extension>"
    judge = _Judge()
    composite = RolloutSettings(harness=None, harness_config=HarnessConfig(), reward="composite",
                                composite_weights=(0.1, 0.9, 1.0), judge=judge)
    good, untagged = Rollout(plan, 0, final_message=tagged), Rollout(plan, 1, final_message=answer)
    for r in (good, untagged):
        score_rollout(r, composite)
    assert good.score == 1.0 and good.composite.reward == pytest.approx(0.1 + 0.9 + 0.75)
    assert untagged.composite.reward == 0.0 and untagged.score == 0.0  # no <class> span: nothing to score
    assert len(judge.prompts) == 1 and "inspect the sensor log" in judge.prompts[0]
    cfg = GRPOConfig(model="x", reward="composite", judge="stub/judge")
    assign_rewards([good, untagged], cfg)
    assert [good.reward, untagged.reward] == pytest.approx([1.75, 0.0])
    assert rw.FORMAT_INSTRUCTIONS in episode_task(plan, None, composite=True).question

    plain = RolloutSettings(harness=None, harness_config=HarnessConfig())
    hit = Rollout(plan, 0, final_message=answer, output_tokens=40)
    miss = Rollout(plan, 1, final_message='{"present": false}', output_tokens=80, forced_final=True)
    for r in (hit, miss):
        score_rollout(r, plain)
    assert (hit.score, hit.valid, miss.score) == (1.0, True, 0.0)
    assign_rewards([hit, miss], GRPOConfig(model="x"))
    assert hit.reward == pytest.approx(1.0 - 0.1 * 0.5) and miss.reward == pytest.approx(-0.25)
    assert (hit.kappa, miss.fail_penalty) == (0.5, 0.25)


def test_rich_progress_renders_a_step():
    import io

    from rich.console import Console

    from tsbench.train.grpo import RichProgress

    buffer = io.StringIO()
    row = {"mean_score": 0.5, "mean_reward": 0.25, "loss": -0.01, "forced_final_rate": 0.125,
           "dropped_groups": 1, "groups": 16, "step_s": 42.0}
    with RichProgress(Console(file=buffer, width=200, force_terminal=False)) as progress:
        progress(1, 300, row)
    assert "score=0.500" in buffer.getvalue() and "1/300" in buffer.getvalue()


def test_batching_engine_gathers_concurrent_requests_and_returns_each_its_own():
    import threading

    from tsbench.train.policy import BatchingEngine, GenRequest, cut_at_eos

    class Echo:
        def __init__(self):
            self.sizes = []

        def generate(self, requests):
            self.sizes.append(len(requests))
            return [[r.prompt_ids[0], r.seed] for r in requests]

    engine = BatchingEngine(Echo(), wait_s=2.0)
    results = {}

    def episode(k):
        results[k] = engine.generate(GenRequest([k], 4, 1.0, seed=100 + k))

    with engine.episode(), engine.episode(), engine.episode(), engine.episode():  # four episodes in flight
        threads = [threading.Thread(target=episode, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert engine.running == 0
    assert results == {k: [k, 100 + k] for k in range(4)}
    assert engine.engine.sizes == [4]  # the first asker waited for the other three: one batch
    assert cut_at_eos([5, 6, 2, 7, 2], {2}, 10) == [5, 6, 2] and cut_at_eos([5, 6, 7], {2}, 2) == [5, 6]
