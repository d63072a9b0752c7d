"""GRPO learns: a tiny randomly initialised Llama, the real sampling engine, advantages and update.

The reward is one the policy can learn from scratch: 1 when the reply ends with token 7, else 0.
Over 30 seeded steps the mean reward must rise well above where it started (about 1/16).
"""

from __future__ import annotations

import random
import time
from types import SimpleNamespace

import pytest
import torch

transformers = pytest.importorskip("transformers")
from accelerate import Accelerator  # noqa: E402

from tsbench.train.advantages import group_advantages  # noqa: E402
from tsbench.train.grpo import GRPOConfig, Sample, update_policy  # noqa: E402
from tsbench.train.policy import GenRequest, HFEngine  # noqa: E402
from tsbench.train.rollouts import assemble_sequence  # noqa: E402

VOCAB, TARGET, EOS, PAD = 16, 7, 1, 0
STEPS, TASKS, GROUP, NEW_TOKENS = 30, 4, 8, 4


def tiny_llama() -> torch.nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=64, bos_token_id=2, eos_token_id=EOS, pad_token_id=PAD,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def reward(output: list[int]) -> float:
    return 1.0 if output and output[-1] == TARGET else 0.0


def test_mean_reward_rises_over_30_steps():
    started = time.perf_counter()
    torch.manual_seed(0)
    rng = random.Random(0)
    model = tiny_llama()
    tokenizer = SimpleNamespace(pad_token_id=PAD, eos_token_id=EOS)
    engine = HFEngine(model, tokenizer, device="cpu")
    cfg = GRPOConfig(model="tiny", lr=1e-2, group_size=GROUP, batch_size=TASKS * GROUP, max_grad_norm=1.0)
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    model, optimizer = accelerator.prepare(model, optimizer)
    history = []
    for step in range(STEPS):
        prompts = [[2] + [rng.randrange(3, VOCAB) for _ in range(4)] for _ in range(TASKS)]
        model.eval()
        requests = [GenRequest(p, NEW_TOKENS, 1.0, seed=1000 * step + i) for i, p in enumerate(prompts)
                    for _ in range(GROUP)]
        outputs = engine.generate(requests)
        model.train()
        samples, rewards = [], []
        for t in range(TASKS):
            group = outputs[t * GROUP:(t + 1) * GROUP]
            group_rewards = [reward(o) for o in group]
            rewards += group_rewards
            advantages = group_advantages(group_rewards, "dr-grpo")
            if advantages.dropped:
                continue
            for output, a in zip(group, advantages.advantages):
                ids, mask = assemble_sequence([(prompts[t], output)])
                samples.append(Sample(ids, mask, a))
        stats = update_policy(accelerator, model, None, optimizer, samples, cfg, PAD)
        assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
        history.append(sum(rewards) / len(rewards))
    first, last = sum(history[:5]) / 5, sum(history[-5:]) / 5
    print(f"mean reward: first 5 steps {first:.3f}, last 5 steps {last:.3f}; "
          f"{time.perf_counter() - started:.1f}s; curve {[round(h, 2) for h in history]}")
    assert last >= first + 0.4, (first, last, history)
    assert last >= 0.6


def test_generated_logprobs_match_full_logits():
    from tsbench.train.grpo import generated_logprobs, micro_batches

    model = tiny_llama().eval()
    samples = [Sample([2, 5, 6, 7, 8, 9], [0, 0, 1, 1, 0, 1], 1.0), Sample([2, 3, 4], [0, 1, 1], -1.0)]
    batch = micro_batches(samples, 100, PAD, "cpu")[0]
    for temperature in (1.0, 2.0):
        with torch.no_grad():
            got = generated_logprobs(model, batch, temperature, chunk=2)
            expected = []
            for s in batch.samples:
                logp = torch.log_softmax(model(torch.tensor([s.ids])).logits[0] / temperature, dim=-1)
                expected += [logp[t - 1, s.ids[t]] for t in range(1, len(s.ids)) if s.mask[t]]
        assert torch.allclose(got, torch.stack(expected), atol=1e-5)


def test_update_with_kl_sequence_norm_and_two_minibatches():
    import copy

    model = tiny_llama()
    reference = copy.deepcopy(model).eval().requires_grad_(False)
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, optimizer = accelerator.prepare(model, optimizer)
    model.train()
    samples = [Sample([2, 5, 6, 7, 8], [0, 0, 1, 1, 1], 1.0), Sample([2, 5, 9, 9], [0, 0, 1, 1], -1.0),
               Sample([2, 3, 7], [0, 1, 1], 0.5), Sample([2, 3, 4, 4, 4, 4], [0, 1, 1, 1, 1, 1], -0.5)]
    cfg = GRPOConfig(model="tiny", kl_beta=0.1, loss_norm="sequence", updates_per_step=2, lr=1e-2)
    stats = update_policy(accelerator, model, reference, optimizer, samples, cfg, PAD)
    assert all(torch.isfinite(torch.tensor(v)) for v in stats.values())
    assert stats["kl"] > 0  # the second minibatch runs after the first update moved the policy
    assert stats["trained_tokens"] == 12
