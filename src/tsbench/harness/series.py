"""The `series` harness: one reply from a model that reads the series natively (a TSLM).

The values (channels x L) go to the model beside the messages, never serialised into them; the
prompt holds the question, the channel names and lengths, and one marker per channel
(models/tslm/prompt.py, the same prompt the TSLM was trained on). A model that also reads a plot
(Toto-1.0-QA: `wants_plot()`) gets the image harness's rendering on the user turn. Chat models cannot
play it.
"""

from __future__ import annotations

from tsbench.core.episode import EpisodeError, EpisodeResult, EpisodeTask
from tsbench.harness.accounting import unfinished
from tsbench.harness.base import Harness
from tsbench.harness.plots import render_series_png
from tsbench.harness.settings import HarnessSettings
from tsbench.models.base import Agent, Message
from tsbench.models.tslm.prompt import TSLM_SYSTEM, series_user_prompt


def series_messages(task: EpisodeTask, with_plot: bool = False) -> list[Message]:
    images = [render_series_png(task.channel_names, task.values)] if with_plot and task.values is not None else []
    return [
        Message("system", TSLM_SYSTEM),
        Message("user", series_user_prompt(task.question, task.channel_names, task.length), images),
    ]


class Series(Harness[HarnessSettings]):
    """`series`: for models that read the series natively (`Agent.reads_series`)."""

    memory = False  # the prompt is the one the TSLM was trained on

    def pairing_problem(self, agent: Agent, cfg: HarnessSettings) -> str | None:
        if not agent.reads_series():
            return f"--harness {self.name} is for models that read the series natively (tslm/); {agent.name} reads messages"
        return super().pairing_problem(agent, cfg)

    def run(self, agent: Agent, task: EpisodeTask, cfg: HarnessSettings) -> EpisodeResult:
        if task.values is None:
            raise EpisodeError("no_series", f"row {task.row_id} has no series for a series-reading model")
        if not agent.reads_series():
            raise EpisodeError("bad_pairing", f"{agent.name} does not read series natively")
        messages = series_messages(task, with_plot=agent.wants_plot())
        completion = agent.generate(
            messages, max_tokens=cfg.max_tokens, temperature=cfg.temperature, task=task.info(), series=task.values
        )
        result = EpisodeResult(final_message="" if unfinished(completion, cfg) else completion.text)
        result.add_completion(completion)
        result.transcript = [
            {"role": m.role, "content": m.content, "series_shape": list(task.values.shape), "images": len(m.images)}
            for m in messages
        ] + [{"role": "assistant", "content": completion.text, "input_tokens": completion.input_tokens}]
        return result
