"""Defect 11 of #25: a template that drops earlier reasoning (Qwen3-style) makes eval show later turns
less than the reply ids as generated. reasoning_history as-rendered (auto's pick for such a template)
renders every turn's prompt exactly as eval does and trains each turn as its own row with its episode's
advantage; as-generated keeps one row per episode and warns; refuse stops before the policy loads."""

from __future__ import annotations

import copy
import types

import pandas as pd
import pytest
import torch

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.models.base import Message
from tsbench.models.local_hf import LocalHFModel
from tsbench.models.resolve import resolve_model
from tsbench.tasks.anomalyxl.taskset import AnomalyXL
from tsbench.tasks.base import Scored
from tsbench.testing.tiny import make_small_vocab_llama
from tsbench.train.backends import Reply
from tsbench.train.batcher import Batcher
from tsbench.train.budget import check_reasoning_history
from tsbench.train.chat_tokens import ChatTokens
from tsbench.train.config import GRPOConfig
from tsbench.train.policy import load_tokenizer
from tsbench.train.policy_agent import PolicyAgent

# Qwen3's rule, reduced: an assistant turn before the last user message loses everything up to </think>.
DROPS_REASONING = (
    "{% set last_user = namespace(i=0) %}{% for m in messages %}{% if m.role == 'user' %}"
    "{% set last_user.i = loop.index0 %}{% endif %}{% endfor %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.role == 'assistant' and loop.index0 < last_user.i and '</think>' in m.content %}"
    "{{ m.content.split('</think>')[-1] }}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizers():
    keeps = load_tokenizer(resolve_model("local/smollm2-135m").weights, True)
    drops = copy.deepcopy(keeps)
    drops.chat_template = DROPS_REASONING
    return keeps, drops


def config(harness: str, **extra) -> GRPOConfig:
    return build(GRPOConfig, {"model": "local/smollm2-135m", "lora": 4, "harness": harness, **extra})


def test_the_probe_tells_a_template_that_drops_reasoning(tokenizers):
    keeps, drops = tokenizers
    assert ChatTokens(keeps).keeps_earlier_reasoning()
    assert not ChatTokens(drops).keeps_earlier_reasoning()


def test_auto_renders_as_eval_where_the_template_drops_reasoning(tokenizers):
    keeps, drops = tokenizers
    assert check_reasoning_history(config("rlm"), keeps) == ("as-generated", None)  # nothing to align
    assert check_reasoning_history(config("rlm"), drops) == ("as-rendered", None)  # the default aligns
    assert check_reasoning_history(config("tools", reasoning_history="as-rendered"), drops) == ("as-rendered", None)
    mode, line = check_reasoning_history(config("rlm", reasoning_history="as-generated"), drops)
    assert mode == "as-generated" and "drops earlier replies' reasoning" in line and "\n" not in line
    with pytest.raises(UserError, match="reasoning_history = refuse"):
        check_reasoning_history(config("rlm", reasoning_history="refuse"), drops)
    with pytest.raises(UserError, match="as-rendered trains each turn as its own row"):
        check_reasoning_history(config("file-agent", family="timesage", reasoning_history="as-rendered"), drops)


def test_single_turn_runs_have_no_history_to_differ(tokenizers):
    _, drops = tokenizers
    assert check_reasoning_history(config("single-pass-text", reasoning_history="refuse"), drops)[1] is None
    assert check_reasoning_history(config("rlm", max_turns=1, reasoning_history="refuse"), drops)[1] is None


def test_an_unknown_mode_is_one_line():
    with pytest.raises(UserError, match="reasoning_history .* must be one of"):
        config("rlm", reasoning_history="strip").validate()


class Recorder:
    """A backend that hands out fixed replies in order and records every prompt it was sent."""

    def __init__(self, replies: list[list[int]]):
        self.replies, self.prompts = list(replies), []

    def generate(self, requests):
        self.prompts += [list(r.prompt_ids) for r in requests]
        return [Reply(self.replies.pop(0)) for _ in requests]


def test_the_policy_sees_at_turn_two_what_eval_renders(tokenizers):
    """The context the policy generates turn 2 from is the ids eval's local model (models/local_hf.py)
    renders for the same conversation: the earlier reply's reasoning is gone, as in eval."""
    _, drops = tokenizers
    encode = lambda text: drops(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    reply1 = encode("<think>tsbench-secret-plan</think>```python\nprint(1)\n```") + [drops.eos_token_id]
    reply2 = encode('{"answer": "Yes"}') + [drops.eos_token_id]
    first = [Message("system", "You analyse series."), Message("user", "Is there an anomaly?")]

    def turn_two_prompt(rendered: bool) -> tuple[list[int], list[Message]]:
        backend = Recorder([reply1, reply2])
        agent = PolicyAgent(Batcher(backend), ChatTokens(drops), max_new_tokens=64, rendered=rendered)
        text = agent.generate(first).text
        second = first + [Message("assistant", text), Message("user", "Output:\n1")]
        agent.generate(second)
        return backend.prompts[1], second

    seen, conversation = turn_two_prompt(rendered=True)
    eval_ids = LocalHFModel._prompt_ids(types.SimpleNamespace(tokenizer=drops), conversation)[0]["input_ids"]
    assert seen == eval_ids[0].tolist()  # the same ids, token for token
    assert "tsbench-secret-plan" not in drops.decode(seen) and "print(1)" in drops.decode(seen)
    generated, _ = turn_two_prompt(rendered=False)  # one row per episode: the reasoning stays in view
    assert "tsbench-secret-plan" in drops.decode(generated) and generated != seen


class WordCount(AnomalyXL):
    """Scored 1 / (1 + words in the final reply): the two episodes of a group differ."""

    name = "word-count-rendered"

    def score(self, category, gold, message):
        return Scored(score=1.0 / (1 + len(message.split())), valid=True)


PLAN, CODE = "<think>plan</think>", "```python\nprint(1)\n```"  # one token each in the tiny vocabulary


class TwoTurns:
    """Turn 1: reasoning, then a code cell. Turn 2 (the final answer): a short or a long one per episode."""

    def __init__(self, tok):
        self.tok, self.prompts = tok, []
        self.ids = {w: tok.convert_tokens_to_ids(w) for w in (PLAN, CODE, "a", "b")}

    def generate(self, requests):
        out = []
        for n, r in enumerate(requests):
            self.prompts.append(list(r.prompt_ids))
            turn = self.tok.decode(r.prompt_ids).count("<|im_start|> assistant")
            words = [PLAN, CODE] if turn == 1 else (["a"] if n % 2 == 0 else ["a", "b", "a"])
            out.append(Reply([self.ids[w] for w in words] + [self.tok.eos_token_id]))
        return out


@pytest.mark.usefixtures("one_torch_thread")
def test_one_trl_step_trains_each_turn_as_its_own_row_with_the_episode_advantage(tmp_path):
    """Through TRL's rollout_func contract: G x max_turns rows per task, each turn's prompt as the template
    renders it (no earlier reasoning), the turn's reply as generated, and the episode's advantage on every row."""
    import contextlib

    from transformers import AutoTokenizer

    from tsbench.train.grpo import build_trainer

    model_dir = make_small_vocab_llama(tmp_path / "tiny", words=(PLAN, CODE, "a", "b"))
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.chat_template = (  # the tiny vocabulary's ChatML, dropping reasoning as DROPS_REASONING does
        "{% set last_user = namespace(i=0) %}{% for m in messages %}{% if m.role == 'user' %}"
        "{% set last_user.i = loop.index0 %}{% endif %}{% endfor %}{% for m in messages %}<|im_start|> {{ m.role }} "
        "{% if m.role == 'assistant' and loop.index0 < last_user.i %}{{ m.content.split('</think>')[-1] }}"
        "{% else %}{{ m.content }}{% endif %} <|im_end|> {% endfor %}"
        "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
    )
    tok.save_pretrained(model_dir)
    settings = {
        "model": f"local/{model_dir}",
        "lora": 0,
        "steps": 1,
        "group_size": 2,
        "batch_size": 2,
        "max_seq_len": 1024,
        "harness": "rlm",
        "max_turns": 2,
        "max_tokens": 8,
        "family": f"{__name__}:WordCount",
        "preset": "small",
        "lengths": [256],
        "categories": ["localize"],
        "gradient_checkpointing": False,
        "save_every": 100,
        "out": str(tmp_path / "run"),
    }
    run = build_trainer(build(GRPOConfig, settings))
    assert run.env.rows_per_episode == 2 and run.trainer.num_generations == 4
    backend = TwoTurns(tok)
    run.env.backend = lambda trainer: contextlib.nullcontext((backend, None))
    seen = []
    generate = run.trainer._generate_and_score_completions
    run.trainer._generate_and_score_completions = lambda batch: seen.append(generate(batch)) or seen[-1]
    run.trainer.train()

    out = seen[0]
    prompts = [tok.decode([t for t in row.tolist() if t != tok.pad_token_id]) for row in out["prompt_ids"]]
    assert len(prompts) == 4  # two episodes x two turns
    turn2 = [p for p in prompts if p.count("<|im_start|> assistant") == 2]
    assert len(turn2) == 2 and all(PLAN not in p for p in turn2)  # rendered as eval renders it
    plan = tok.convert_tokens_to_ids(PLAN)
    assert sum(plan in row.tolist() for row in out["completion_ids"]) == 2  # turn 1's reasoning is trained on
    assert sorted(prompts) == sorted(tok.decode(p) for p in backend.prompts)  # each row: what the policy saw
    rollouts = pd.read_json(run.out / "rollouts" / "samples.jsonl", lines=True)
    assert rollouts["turns"].tolist() == [2, 2] and rollouts["score"].nunique() == 2
    advantages = out["advantages"].tolist()
    assert len(advantages) == 4 and len({round(a, 6) for a in advantages}) == 2  # one value per episode
    assert sum(advantages) == pytest.approx(0.0, abs=1e-6) and min(abs(a) for a in advantages) > 0
    assert all(out["tool_mask"][i].sum() > 0 for i in range(4))  # every turn's reply is in the loss
    metrics = pd.read_parquet(run.out / "metrics.parquet")
    assert metrics["grad_norm"].iloc[0] > 0 and torch.isfinite(torch.tensor(metrics["loss"].iloc[0]))


def test_turn_rows_are_padded_to_max_turns_and_trl_is_sized_for_them(tmp_path):
    """Every episode hands TRL exactly max_turns rows (its turns, then masked stand-ins), so TRL's groups of
    G x max_turns rows hold whole episodes; a forward still takes micro_batch_size rows."""
    from tsbench.train.policy_agent import Turn
    from tsbench.train.rollouts import Environment, Episode, ordered_rows

    env = types.SimpleNamespace(rendered=True, rows_per_episode=3, tokenizer=types.SimpleNamespace(eos_token_id=2))
    played = Episode("k", 0, {}, turns=[Turn([1, 5], [7, 8, 2], [-0.1, -0.2, -0.3]), Turn([1, 5, 9], [6, 2], None)])
    rows = Environment.rows(env, played)
    assert [(r.prompt_ids, r.completion_ids, r.env_mask, r.logprobs) for r in rows] == [
        ([1, 5], [7, 8, 2], [1, 1, 1], [-0.1, -0.2, -0.3]),
        ([1, 5, 9], [6, 2], [1, 1], None),
        ([2], [2], [0], None),  # a turn never played: no token in the loss, next to no compute
    ]
    assert [r.env_mask for r in Environment.rows(env, Episode("k", 1, {}))] == [[0]] * 3  # never generated

    # a group's rows, longest first, each knowing its episode: TRL's forward chunks hold alike rows
    flat, owner = ordered_rows([rows, Environment.rows(env, Episode("k", 1, {}))], group=2)
    assert [len(r.prompt_ids) + len(r.completion_ids) for r in flat] == [5, 5, 2, 2, 2, 2] and owner == [
        0,
        0,
        0,
        1,
        1,
        1,
    ]

    cfg = build(GRPOConfig, {"model": "local/x", "group_size": 4, "batch_size": 8, "micro_batch_size": 2})
    one, per_turn = (cfg.trl_values(world=1, rows=n, on_gpu=False, reward_weights=[1.0]) for n in (1, 3))
    assert (per_turn["num_generations"], per_turn["per_device_train_batch_size"]) == (12, 2)
    assert per_turn["gradient_accumulation_steps"] == 3 * one["gradient_accumulation_steps"]
    assert per_turn["max_completion_length"] == one["max_completion_length"] // 3  # Dr. GRPO's sum keeps its scale
