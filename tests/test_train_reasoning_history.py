"""Defect 11 of #25: training extends a multi-turn prompt by each reply's ids as generated (reasoning
included); a template that drops earlier reasoning (Qwen3-style) makes eval show later turns less.
The run says so before the policy loads, or refuses under `reasoning_history = "refuse"`."""

from __future__ import annotations

import copy

import pytest

from tsbench.core.config import build
from tsbench.core.errors import UserError
from tsbench.models.resolve import resolve_model
from tsbench.train.agent import ChatTokens
from tsbench.train.budget import check_reasoning_history
from tsbench.train.config import GRPOConfig
from tsbench.train.policy import load_tokenizer

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


def test_a_multi_turn_run_is_warned_or_refused(tokenizers):
    keeps, drops = tokenizers
    assert check_reasoning_history(config("rlm"), keeps) is None
    line = check_reasoning_history(config("rlm"), drops)
    assert line and "drops earlier replies' reasoning" in line and "\n" not in line
    with pytest.raises(UserError, match="reasoning_history = refuse"):
        check_reasoning_history(config("rlm", reasoning_history="refuse"), drops)


def test_single_turn_runs_have_no_history_to_differ(tokenizers):
    _, drops = tokenizers
    assert check_reasoning_history(config("single-pass-text", reasoning_history="refuse"), drops) is None
    assert check_reasoning_history(config("rlm", max_turns=1, reasoning_history="refuse"), drops) is None


def test_an_unknown_mode_is_one_line():
    with pytest.raises(UserError, match="reasoning_history must be one of"):
        config("rlm", reasoning_history="strip").validate()
