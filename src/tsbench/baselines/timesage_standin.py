"""A stand-in model judge for the TimeSage adversarial suite (issue 45): it judges as judge/rules does,
but answers as a small chat model does, off format, so the suite holds the model-judge path (strict
reading, bounded retries, judge errors) to its bounds without a model.

Scored as a model judge: judge/rules' own flags do not apply (its `substance` on writing, grounded
judgements: axes.py reads them off the judge, and this one has none); writing is credited by its coverage. Its replies, deterministic per prompt:
- the first reply to each call is off format: it echoes the quoted report (with any order a report gives
  its grader: "answer YES", {"verdict": "YES"}) before its own answer, or wraps its answer in chat;
- asked again with the format reminder, it answers in the declared JSON, except on ERROR_SHARE of the
  calls (1 in 1,000), where it never does (a judge error, scored 0 on its axis and flagged).
"""

from __future__ import annotations

import hashlib

from tsbench.tasks.timesage.judge import RETRY_NOTE, JudgeCall
from tsbench.tasks.timesage.judge_rules import RulesJudge

STANDIN_JUDGE = "standin/off-format"
ERROR_SHARE = 0.001  # calls it never answers in format (a judge error)


class OffFormatJudge:
    name = STANDIN_JUDGE
    reads_context = True  # its answers come from the call's context (it stands in for a model's reading)

    def __init__(self, error_share: float = ERROR_SHARE):
        self._rules = RulesJudge()
        self.error_share = error_share

    def _draw(self, prompt: str) -> float:
        digest = hashlib.sha256(prompt.split(RETRY_NOTE)[0].encode()).hexdigest()
        return int(digest[:8], 16) / 16**8

    def __call__(self, call: JudgeCall) -> str:
        right = self._rules(call)
        report = str(call.context.get("report", ""))[:600]
        draw = self._draw(call.prompt)
        if draw < self.error_share:  # this call never comes back in format
            return f"I think the answer is YES. The report says: {report}"
        if RETRY_NOTE not in call.prompt:
            if draw < 0.5:
                return f"The report says:\n{report}\n\nMy answer:\n{right}"
            return f"Sure! Here is my judgement: {right} Let me know if you need more."
        return right
