"""`scripted/timerbed-first` (formerly `scripted-timerbed/first`): a constant-class reference for TimerBed that sees only what a model sees
(the task's class list) and always names the first class, in TimeMaster's output format
(`<think>...</think><class>...</class>`). It makes `tsbench eval --family timerbed` and the board run
offline, and is the floor a trained policy must clear (its accuracy is that class's share)."""

from __future__ import annotations

from tsbench.models.base import Agent, Completion, Message, TaskInfo


class FirstClassPolicy(Agent):
    plays = ("single-pass-image", "single-pass-text")
    name = "scripted/timerbed-first"

    def generate(
        self, messages: list[Message], *, max_tokens=None, temperature=None, task: TaskInfo | None = None, **_
    ) -> Completion:
        options = list(task.options) if task is not None else []
        choice = options[0] if options else ""
        text = f"<think>A constant reference: it names the first listed class.</think><class>{choice}</class>"
        prompt = sum(len(str(m.content)) for m in messages) // 4
        return Completion(text, input_tokens=prompt, output_tokens=len(text) // 4)
