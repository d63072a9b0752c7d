"""The one model call of TimeMaster's reward: ask the soft-reward judge about one extension (the prompt
and the reply's reading are pure, in timemaster_reward.py). As the public code does: temperature 1.0,
one float back, asked again when the reply holds none, generic advice capped; a judge that cannot be
reached gives 0, so an outage never stops training."""

from __future__ import annotations

from tsbench.models.base import ChatModel, Message
from tsbench.train.timemaster_reward import (
    DEFAULT,
    Tagged,
    TimeMasterReward,
    cap_generic,
    judge_prompt,
    parse_judge_reply,
)


def soft_score(judge: ChatModel, tagged: Tagged, settings: TimeMasterReward = DEFAULT) -> float:
    """The judge's score of `tagged.extension` in [0, 1] (0 when it never gives a usable one)."""
    if not tagged.extension:
        return 0.0
    prompt = [Message("user", judge_prompt(tagged))]
    for _ in range(max(1, settings.judge_attempts)):
        try:
            reply = judge.generate(prompt, max_tokens=settings.judge_max_tokens, temperature=settings.judge_temperature)
        except Exception:  # an unreachable judge must not stop training: the rollout earns no soft reward
            return 0.0
        value = parse_judge_reply(reply.text)
        if value is not None:
            return cap_generic(tagged.extension, value, settings)
    return 0.0
