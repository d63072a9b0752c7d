"""One reply's TimeMaster reward through the live path: the composite reward's TRL functions
(train/rewards.py) over a family whose classes are `options`, summed as TRL sums them."""

from __future__ import annotations

import json

from tsbench.core.class_tags import named_option
from tsbench.train import rewards as rw
from tsbench.train import timemaster_reward as tm
from tsbench.train.config import RewardConfig


class Classes:
    """A family whose answer classes are `options` (TimerBed's `answer_class` / `gold_class` shape)."""

    def __init__(self, options):
        self.options = list(options)

    def answer_class(self, category, gold, text):
        return named_option(text, self.options)

    def gold_class(self, category, gold):
        return named_option(gold["answer"], self.options)


def reward(text, gold, options, soft=None, settings=tm.DEFAULT):
    """{format, hard, soft (gated), total, predicted} of `text` against `gold`, one of `options`."""
    config = RewardConfig(
        reward="composite",
        format_rule=settings.format_rule,
        format_weight=settings.format_weight,
        hard_weight=settings.hard_weight,
        soft_weight=settings.soft_weight,
    )
    family = Classes(options)
    functions, weights = rw.reward_functions(config, family)
    columns = {
        "final_message": [text],
        "category": ["c"],
        "gold": [json.dumps({"answer": gold})],
        "score": [0.0],
        "judge_score": [soft],
    }
    fmt, hard, gated = (fn(prompts=["k"], completions=None, **columns)[0] for fn in functions)
    reading = rw.read_reply(family, "c", {"answer": gold}, text, rw.composite_settings(config))
    total = rw.weighted_total(functions, weights, ["k"], columns)[0]
    return {"format": fmt, "hard": hard, "soft": gated, "total": total, "predicted": reading.predicted}
