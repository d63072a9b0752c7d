"""TimeMaster's advantage std as a named option: "sample" (the authors' verl code and TRL, the default)
or "population" (eq. 6 as written), a pure function checked against TRL's own formula and by hand."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

from tsbench.core.config import build
from tsbench.train.advantages import group_advantages
from tsbench.train.config import GRPOConfig

NAN = float("nan")


def test_sample_is_trls_advantage_with_unscorable_rollouts_left_out():
    """TRL 1.16 (sum_then_normalize, scale_rewards group): per group nanmean, nanstd (Bessel) + 1e-4, NaN -> 0."""
    import torch
    from trl.trainer.utils import nanstd

    rewards = [1.0, 0.0, NAN, 0.5, 0.2, 0.9, 0.9, 0.1, NAN, 0.3, 0.0, 1.0, 1.0, 0.0, 0.0]
    grouped = torch.tensor(rewards).view(-1, 5)
    mean = torch.nanmean(grouped, dim=1, keepdim=True)
    trl = torch.nan_to_num((grouped - mean) / (nanstd(grouped, dim=1).unsqueeze(1) + 1e-4), nan=0.0).view(-1)
    ours = group_advantages(rewards, 5)
    assert ours.tolist() == pytest.approx(trl.tolist(), abs=1e-5)
    assert ours[2] == 0.0 and ours[8] == 0.0


def test_population_sigma_is_eq_6_by_hand():
    # one right answer in a group of 5: mean 0.2; population var (0.64 + 4 x 0.04) / 5 = 0.16; sample 0.8 / 4 = 0.2
    rewards = [1.0, 0.0, 0.0, 0.0, 0.0]
    population = group_advantages(rewards, 5, std="population", eps=0.0)
    sample = group_advantages(rewards, 5, std="sample", eps=0.0)
    assert population.tolist() == pytest.approx([2.0, -0.5, -0.5, -0.5, -0.5])
    assert sample[0] == pytest.approx(0.8 / math.sqrt(0.2))
    assert (sample / population)[0] == pytest.approx(math.sqrt(4 / 5))  # the 0.894 at G = 5
    # an unscorable rollout leaves the group: n = 4 scored, population sigma over 4
    partial = group_advantages([1.0, 0.0, NAN, 0.0, 0.0], 5, std="population", eps=0.0)
    assert partial.tolist() == pytest.approx(
        [math.sqrt(3), -1 / math.sqrt(3), 0.0, -1 / math.sqrt(3), -1 / math.sqrt(3)]
    )


def test_flat_and_lone_groups_carry_no_advantage_and_bad_input_is_refused():
    for std in ("sample", "population"):
        assert group_advantages([0.7] * 4 + [NAN, NAN, 0.3, NAN], 4, std=std).tolist() == [0.0] * 8
    with pytest.raises(ValueError):
        group_advantages([1.0, 0.0, 1.0], 2)
    with pytest.raises(ValueError):
        group_advantages([1.0, 0.0], 2, std="bessel")


def test_the_option_defaults_to_the_authors_code_and_needs_group_scaling():
    base = {"family": "trend", "harness": "single-pass-image"}
    assert build(GRPOConfig, base).advantage_std == "sample"
    grpo = build(GRPOConfig, {**base, "loss_type": "grpo", "advantage_std": "population"})
    assert grpo.scaling_problems(1) == []
    dr = build(GRPOConfig, {**base, "advantage_std": "population"})  # dr_grpo: scale_rewards none, no sigma
    assert dr.scaling_problems(1) == [
        "advantage_std population divides by a group's sigma: scale_rewards none has none"
    ]


def test_the_trainer_replaces_trls_advantages_with_this_processs_population_slice():
    """EpisodeTrainer._advantages reads the step's gathered rewards (every process's rows, as TRL's
    _calculate_rewards returns them), weights them, and keeps this process's rows."""
    import torch

    from tsbench.train.trainer import episode_trainer_class

    trainer = episode_trainer_class().__new__(episode_trainer_class())
    per_func = torch.tensor([[1.0, 0.0], [0.0, 1.0], [NAN, NAN], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    weights = torch.tensor([0.9, 0.1])
    trainer._rewards_per_func = per_func
    trainer.reward_weights = weights
    trainer.num_generations = 3
    trainer.args = types.SimpleNamespace(advantage_std="population")
    trainer.accelerator = types.SimpleNamespace(process_index=1)
    totals = [0.9, 0.1, NAN, 0.0, 1.0, 0.0]
    expected = group_advantages(totals, 3, std="population")
    got = trainer._advantages(3)
    assert got.dtype == torch.float32
    assert got.tolist() == pytest.approx(expected[3:].tolist(), abs=1e-6)
    assert np.isfinite(got.numpy()).all()
