"""The GRPO loss, pure torch: a token-level clipped surrogate over model-generated tokens only.

For every generated token t of rollout i (prompt and sandbox observations are masked out before
this is called), with ratio rho = pi_theta(t) / pi_old(t) and the rollout's advantage A_i:

    loss = - sum_t w_t * min(rho_t * A_i, clip(rho_t, 1 - eps, 1 + eps) * A_i)
           + beta * sum_t w_t * KL_t,          KL_t = exp(r_t) - r_t - 1,  r_t = log pi_ref(t) - log pi_theta(t)

(the k3 estimator of KL[pi_theta || pi_ref], as in GRPO). The weights w_t say how tokens are
averaged: "token" gives every generated token of the whole batch the same weight 1/N (token-level,
as Dr. GRPO and DAPO do, no per-sequence length normalisation); "sequence" averages within each
rollout and then over rollouts (TimeMaster eq. 7). Weights are computed for the whole optimizer
batch up front, so micro-batches with gradient accumulation add up to exactly the same loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

LOSS_NORMS = ("token", "sequence")


def token_weight(n_tokens: int, *, total_tokens: int, n_sequences: int, norm: str = "token") -> float:
    """The weight of each generated token of a rollout with `n_tokens` of them, in a batch of
    `n_sequences` rollouts holding `total_tokens` generated tokens."""
    if norm == "token":
        return 1.0 / total_tokens if total_tokens else 0.0
    if norm == "sequence":
        return 1.0 / (n_tokens * n_sequences) if n_tokens and n_sequences else 0.0
    raise ValueError(f"loss norm must be one of {', '.join(LOSS_NORMS)} (got {norm!r})")


def gather_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / T)[target] in float32; logits (..., V), targets (...)."""
    logits = logits.float()
    if temperature and temperature != 1.0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


@dataclass
class LossParts:
    loss: torch.Tensor  # what backward() is called on
    policy_loss: float  # -sum w * surrogate
    kl: float  # sum w * KL (a weighted mean when the weights sum to 1 over the batch)
    clip_frac: float  # sum w * 1[clipped]
    ratio_mean: float  # sum w * rho


def clipped_surrogate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    ref_logprobs: torch.Tensor | None = None,
    kl_beta: float = 0.0,
) -> LossParts:
    """All inputs are flat (N,) tensors over the selected (generated) tokens: the advantage of each
    token is its rollout's; `weights` already hold the averaging (see `token_weight`)."""
    if not logprobs.shape == old_logprobs.shape == advantages.shape == weights.shape:
        raise ValueError("logprobs, old_logprobs, advantages and weights must have the same shape")
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    surrogate = torch.minimum(unclipped, clipped)
    policy_loss = -(weights * surrogate).sum()
    loss = policy_loss
    kl_value = 0.0
    if ref_logprobs is not None and kl_beta > 0:
        log_ratio = ref_logprobs - logprobs
        kl = torch.exp(log_ratio) - log_ratio - 1.0
        kl_sum = (weights * kl).sum()
        loss = loss + kl_beta * kl_sum
        kl_value = float(kl_sum.detach())
    with torch.no_grad():
        was_clipped = ((advantages > 0) & (ratio > 1.0 + clip_eps)) | ((advantages < 0) & (ratio < 1.0 - clip_eps))
        clip_frac = float((weights * was_clipped.float()).sum())
        ratio_mean = float((weights * ratio).sum())
    return LossParts(loss, float(policy_loss.detach()), kl_value, clip_frac, ratio_mean)
