"""What a harness is: one episode's loop, its settings class and what it can do, declared in one place.

A harness subclasses `Harness[S]`, S its settings class (a `HarnessSettings` subclass with its own
`setting(...)` fields and SECTION, harness/settings.py), and declares its capabilities as class
attributes. Everything that must treat harnesses differently (executor preflight, the jail pool, Ray's
no-jail guard, the agent pairing checks, training, the ablation board through run.json) asks these,
never a list of names, so a plugin harness is treated exactly as a built-in one:

    class Loop(Harness[LoopSettings]):
        kernel = True  # jailed, pooled, refused on a worker that cannot jail

        def run(self, agent, task, cfg: LoopSettings) -> EpisodeResult: ...

A bare function `(agent, EpisodeTask, settings) -> EpisodeResult` registered as a harness is played
as a `FunctionHarness` with the default capabilities (no kernel, no images, no tools).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from tsbench.core.episode import EpisodeOutcome, EpisodeResult, EpisodeTask
from tsbench.core.errors import UserError
from tsbench.harness.settings import HarnessSettings, as_settings
from tsbench.models.base import Agent

S = TypeVar("S", bound=HarnessSettings)
After = Callable[[int, EpisodeOutcome], "str | None"]  # (index, outcome) -> feedback for the next episode
CAPABILITIES = ("kernel", "images", "tools", "chains", "memory", "reference", "turn_rows")


class Harness(Generic[S]):
    """One episode: task in, final message and trace out. Subclasses set the capabilities below."""

    settings_class: ClassVar[type] = HarnessSettings  # set from the generic argument (Harness[S])
    kernel: ClassVar[bool] = False
    """Model-written code runs in a jailed kernel: the jail is checked before any episode, jails are
    pooled, and a worker that cannot jail refuses it."""
    images: ClassVar[str | None] = None
    """Where the policy sees pictures: "prompt" (its first message), "observations" (later turns), or None."""
    tools: ClassVar[bool] = False
    """The model calls typed tools (the tool protocol applies; native calls need an agent that has them)."""
    chains: ClassVar[bool] = False
    """Plays a family's chain of samples with one agent state (`run_chain`)."""
    memory: ClassVar[bool] = True
    """TimeClaw's memory wrapper may prefix its question: [memory] settings apply."""
    reference: ClassVar[bool] = False
    """Played by reference policies only, which read the task itself (never by chat models)."""
    turn_rows: ClassVar[bool] = False
    """One conversation of up to max_turns replies, each extending the last: training may take each turn as a row."""

    name: str = ""  # the registered name it was loaded by

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            if typing.get_origin(base) is Harness:
                (argument,) = typing.get_args(base)
                if isinstance(argument, type):
                    if not issubclass(argument, HarnessSettings):
                        raise TypeError(f"{cls.__name__}: Harness[S] needs S to subclass HarnessSettings")
                    cls.settings_class = argument

    # -- playing -------------------------------------------------------------------------------
    def run(self, agent: Agent, task: EpisodeTask, cfg: S) -> EpisodeResult:
        """Play one episode. Raising ModelError, EpisodeError or SandboxError ends it as an error row."""
        raise NotImplementedError

    def run_chain(
        self, agent: Agent, tasks: list[EpisodeTask], cfg: S, after: After | None = None
    ) -> list[EpisodeOutcome]:
        """Play `tasks` in order with one agent state, each episode's failure recorded as its outcome
        (harness.play.episode_outcome); `after(i, outcome)` gives the feedback before task i + 1."""
        raise UserError(f"harness {self.name} cannot play a chain of samples")

    # -- what it needs -------------------------------------------------------------------------
    def prepare(self) -> None:
        """Checks before any episode, e.g. the optional packages it needs (default: none)."""

    def settings(self, given: Any) -> S:
        """Its own settings from any HarnessSettings (harness/settings.py: a changed setting it does not
        read is refused)."""
        return as_settings(self, given)

    def pairing_problem(self, agent: Agent, cfg: S) -> str | None:
        """Why `agent` cannot play this harness with `cfg` (None: it can). The default asks the
        agent's declared capabilities (models/base.py `Agent`)."""
        plays = agent.harnesses()
        if plays is not None and self.name not in plays:
            return f"{agent.name} plays {', '.join(plays)}, not {self.name}"
        if self.reference and agent.chats():
            return f"--harness {self.name} is for reference policies (detector/, classical/); {agent.name} is a model"
        if not self.reference and not agent.chats():
            return f"{agent.name} answers from the task itself: play it with a reference harness (direct)"
        if self.images and not agent.sees_images():
            return (
                f"{agent.name} reads text only, and --harness {self.name} shows the series as an image: "
                "use a text harness (single-pass-text, rlm, tools)"
            )
        return None

    def capabilities(self) -> dict[str, Any]:
        """What it declares, as run.json records it (the leaderboard reads no harness)."""
        return {name: getattr(self, name) for name in CAPABILITIES}

    def __repr__(self) -> str:
        return f"<harness {self.name or type(self).__name__}>"


class FunctionHarness(Harness[HarnessSettings]):
    """A bare function registered as a harness (a plugin's `(agent, task, settings) -> EpisodeResult`)."""

    def __init__(self, run: Callable[[Any, EpisodeTask, Any], EpisodeResult]):
        self._run = run

    def run(self, agent: Agent, task: EpisodeTask, cfg: HarnessSettings) -> EpisodeResult:
        return self._run(agent, task, cfg)


__all__ = ["CAPABILITIES", "After", "FunctionHarness", "Harness", "S"]
