"""The one model call of TimeMaster's reward: ask the soft-reward judge about one extension (the prompt
and the reading of its replies are pure, in timemaster_reward.py). As the public code does: temperature
1.0, one float back, asked again while the value is outside [0, 1] (here a bounded number of times),
generic advice capped; a judge that cannot be reached gives 0, so an outage never stops training."""

from __future__ import annotations

from tsbench.models.base import ChatModel, Message
from tsbench.train.timemaster_reward import DEFAULT, Tagged, TimeMasterReward, judge_prompt, judged_score


def soft_score(judge: ChatModel, tagged: Tagged, category: str = "", settings: TimeMasterReward = DEFAULT) -> float:
    """The judge's score of `tagged.extension` in [0, 1] (0 when it never gives a usable one)."""
    if not tagged.extension:
        return 0.0
    prompt = [Message("user", judge_prompt(tagged, category, settings))]

    def ask() -> str:
        return judge.generate(prompt, max_tokens=settings.judge_max_tokens, temperature=settings.judge_temperature).text

    return judged_score(ask, tagged.extension, settings)
