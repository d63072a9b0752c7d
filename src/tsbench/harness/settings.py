"""Harness settings: the ones every harness reads, each harness's own section, and a run's view of them all.

A harness's settings class subclasses `HarnessSettings` and declares its own fields with `setting(...)`
and its `SECTION` ([eval.rlm] in TOML, its own group in --help); the harness receives an instance of
exactly that class (`Harness[S]`, harness/base.py), so a setting another harness reads never reaches
it. `MemorySettings` is the section of TimeClaw's memory wrapper, which plays around a harness that
declares the `memory` capability.

A run does not know its harness when it reads its flags and TOML (the family or the agent may choose
it), so `HarnessConfig` holds every section at once: the shared fields plus one nested section per
registered harness settings class (plugins' included) and [memory]. It is assembled from the harness
registry on first use, so a plugin's section gets its flags and TOML keys without an edit here.
`settings_for(harness, config)` then gives the harness its own settings and refuses, in one line, any
changed setting of a section the harness does not have: a setting that does not apply never passes
silently.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from tsbench.core.errors import UserError
from tsbench.core.settings import attribute_docs, setting

log = logging.getLogger(__name__)


@dataclass
class HarnessSettings:
    """How one episode runs, the settings every harness shares. Defaults are the paper's
    (spec/harness.md). Each is a TOML key under [eval] or [grpo] and a flag of the same name."""

    SECTION: ClassVar[str | None] = None  # a subclass names its own section

    max_turns: int = setting(15, "Model replies per episode.", ge=1)
    observation_chars: int = setting(8192, "Characters of kernel output shown per turn.", ge=1)
    max_figures: int = setting(2, "Figures returned per turn (image harnesses).", ge=0)
    cell_timeout_s: float = setting(
        300.0, "Seconds per code cell before interrupt/restart.", gt=0, aliases=("--cell-timeout",)
    )
    memory_gib: float = setting(
        4.0, "Kernel memory cap in GiB, per kernel process (see harness/runtime for the whole-episode bound).", gt=0
    )
    cell_output_mib: float = setting(
        64.0,
        "MiB a code cell may send the host (output, results, figures); past it messages are dropped unread, "
        "and the observation says so.",
        gt=0,
    )
    episode_output_mib: float = setting(
        256.0, "MiB all of an episode's cells may send the host; past it, as past the cell's.", gt=0
    )
    unsafe_sandbox: bool = setting(
        False, "Run kernels WITHOUT the bubblewrap jail (recorded in run.json and shown by the leaderboard)."
    )
    max_tokens: int | None = setting(
        None, "Max tokens per model reply (also local models' max new tokens) [provider default].", ge=1
    )
    temperature: float | None = setting(None, "Sampling temperature [provider default].", ge=0)
    episode_token_cap: int | None = setting(
        None, "End an episode (as an error) past this many tokens, in + out, all turns.", ge=1
    )
    episode_wall_s: float | None = setting(
        None, "End an episode (as an error) past this many seconds.", gt=0, aliases=("--episode-timeout",)
    )
    text_budget_chars: int = setting(200_000, "single-pass-text: characters of serialized values.", ge=1)
    # A bound on host memory and on the row: a longer final answer is cut (the row's attributes say by how
    # much) before it is scored and stored; 1 MB is far beyond any answer schema.
    final_answer_chars: int = setting(
        1_000_000, "Characters of the final answer kept; the rest is cut before scoring (recorded in the row).", ge=1
    )
    answer_cut_replies: bool = setting(
        False,
        "Take a reply the token cap cut off as the final answer (off: such "
        "a reply is no answer and scores 0); for training rewards that read "
        "short capped replies.",
    )

    def kernel_limits(self) -> dict[str, Any]:
        """What a kernel harness's Sandbox is given (harness/runtime): the cell timeout, the memory cap, the output
        budgets, the jail."""
        return {
            "cell_timeout_s": self.cell_timeout_s,
            "memory_bytes": int(self.memory_gib * 2**30),
            "cell_output_bytes": int(self.cell_output_mib * 2**20),
            "episode_output_bytes": int(self.episode_output_mib * 2**20),
            "unsafe": self.unsafe_sandbox,
        }

    @property
    def recursion_depth(self) -> int:
        """What a row's `depth` column records (rlm's sub_rlm depth; 0 for a harness without recursion)."""
        return 0

    def name_suffix(self) -> str:
        """What the default run directory's name adds after the harness (rlm: __d1; file agent: __sequential)."""
        return ""


@dataclass
class MemorySettings:
    """[memory]: TimeClaw's episodic memory, around a harness that declares the memory capability
    (timeclaw/memory_wrapper.py)."""

    SECTION: ClassVar[str] = "memory"

    memory_bank: str | None = setting(
        None, "A bank parquet (tsbench memory build); retrieved precedents prefix the prompt.", aliases=("--memory",)
    )
    top_k: int = setting(3, "Precedents retrieved from memory_bank and injected.", ge=0)
    memory_pool: int = setting(20, "Stage-1 retrieval pool size N (cosine on the context embedding).", ge=1)
    memory_family_filter: bool = setting(False, "Only precedents of the task's own category.")
    memory_exclude_self: bool = setting(True, "Never retrieve the task's own record (bank and eval set may overlap).")
    embedder: str | None = setting(None, "Context encoder for queries [the one the bank was built with].")

    @property
    def active(self) -> bool:
        """Whether the wrapper retrieves anything (a bank and top_k > 0)."""
        return bool(self.memory_bank) and self.top_k > 0


SHARED = frozenset(f.name for f in dataclasses.fields(HarnessSettings))


def section_name(settings_class: type, harness: str) -> str:
    """A settings class's section: its own SECTION, else the name of the (first) harness it is registered by."""
    return settings_class.__dict__.get("SECTION") or harness


def section_key(name: str) -> str:
    """[eval.file-agent] is the nested field file_agent."""
    return name.replace("-", "_")


def _own_fields(settings_class: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(settings_class) if f.name not in SHARED and f.init]


def _section_class(settings_class: type, name: str) -> type:
    """A dataclass of the settings class's own fields (what its [section] table holds), docs kept."""
    hints = typing.get_type_hints(settings_class)
    docs: dict[str, str] = {}
    for owner in reversed(settings_class.__mro__):
        docs.update(attribute_docs(owner))
    made = []
    for f in _own_fields(settings_class):
        meta = dict(f.metadata)
        if not meta.get("doc") and docs.get(f.name):
            meta["doc"] = docs[f.name]
        default = {"default_factory": f.default_factory} if f.default_factory is not dataclasses.MISSING else {}
        if not default:
            default = {"default": None if f.default is dataclasses.MISSING else f.default}
        made.append((f.name, hints[f.name], dataclasses.field(metadata=meta, **default)))
    made = dataclasses.make_dataclass(
        f"{settings_class.__name__}Section",
        made,
        namespace={"SECTION": name, "__doc__": f"[{name}]: {settings_class.__doc__}", "__reduce__": _reduce_section},
    )
    made.__module__ = settings_class.__module__  # whose settings these are (a library's own stay TOML keys only)
    return made


def _reduce_section(self: Any) -> tuple:
    """A section class is made at run time: pickled (TRL saves its args) by its section name and values."""
    return (_rebuild_section, (self.SECTION, {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}))


def _rebuild_section(name: str, values: dict) -> Any:
    return sections().classes[name](**values)


@dataclass(frozen=True)
class Sections:
    """Every harness section of this install, by section name: its own-fields class (what its table
    holds), the settings class it belongs to, and the harnesses that read it."""

    classes: dict[str, type]
    owners: dict[str, type]
    players: dict[str, tuple[str, ...]]


@functools.cache
def sections() -> Sections:
    """The sections of every registered harness (loaded once; a plugin that fails to load is skipped
    with a warning here and fails with its own error when a run chooses it)."""
    from tsbench.harness.registry import HARNESSES, get_harness

    classes: dict[str, type] = {}
    owners: dict[str, type] = {MemorySettings.SECTION: MemorySettings}
    players: dict[str, list[str]] = {MemorySettings.SECTION: []}
    for name in HARNESSES:
        try:
            harness = get_harness(name)
        except UserError as exc:
            log.warning("harness %s has no settings section here: %s", name, exc)
            continue
        if harness.memory:
            players[MemorySettings.SECTION].append(name)
        settings_class = harness.settings_class
        if not _own_fields(settings_class):
            continue
        section = next((s for s, owner in owners.items() if owner is settings_class), None)
        section = section or section_name(settings_class, name)
        if owners.get(section, settings_class) is not settings_class:
            log.warning("harness %s: section [%s] is taken; its own settings cannot be set", name, section)
            continue
        if section not in classes:
            owners[section], classes[section] = settings_class, _section_class(settings_class, section)
        players.setdefault(section, []).append(name)
    classes[MemorySettings.SECTION] = MemorySettings
    return Sections(classes, owners, {k: tuple(v) for k, v in players.items()})


class _Config(HarnessSettings):
    """The methods of the assembled HarnessConfig (its fields are made in `assembled_config_class`)."""

    def section(self, name: str) -> Any:
        return getattr(self, section_key(name))

    def __reduce__(self):  # the class is made at run time: pickle it by its values
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return (_rebuild, (values,))


def _rebuild(values: dict) -> Any:
    return assembled_config_class()(**values)


@functools.cache
def assembled_config_class() -> type:
    """The class `HarnessConfig` names: the shared settings and a field per section of this install."""
    found = sections()
    fields = [(section_key(name), cls, dataclasses.field(default_factory=cls)) for name, cls in found.classes.items()]
    made = dataclasses.make_dataclass(
        "HarnessConfig",
        fields,
        bases=(_Config,),
        namespace={
            "__doc__": "Every harness setting of a run, before its harness is known: the shared ones "
            "and one nested section per harness (harness/settings.py)."
        },
    )
    made.__module__ = __name__
    return made


def __getattr__(name: str) -> Any:
    if name == "HarnessConfig":
        return assembled_config_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _changed(obj: Any) -> list[str]:
    """Fields of a settings dataclass that differ from their class's defaults."""
    default = type(obj)()
    return [f.name for f in dataclasses.fields(obj) if getattr(obj, f.name) != getattr(default, f.name)]


def _refusal(names: dict[str, str], harness: Any) -> UserError:
    lines = []
    players = sections().players
    for name, section in names.items():
        why = f"which harness {harness.name} does not have"
        if section == MemorySettings.SECTION and harness.memory:
            why = f"and the memory wrapper is not played around harness {harness.name} here"
        elif players.get(section):
            why += f" (it is read by {', '.join(players[section])})"
        lines.append(f"{name} (--{name.replace('_', '-')}) is a setting of [{section}], {why}")
    return UserError("; ".join(lines))


def settings_for(harness: Any, given: Any, *, memory: bool = False) -> Any:
    """`harness`'s own settings (an instance of its settings class) from `given`: a HarnessConfig, or
    any HarnessSettings. A setting changed from its default that `harness` does not read is refused
    (UserError, one line); so is a [memory] setting unless the caller plays the memory wrapper
    (`memory=True`) around a harness that has the memory capability."""
    cls = harness.settings_class
    if type(given) is cls:
        return given
    foreign: dict[str, str] = {}
    values: dict[str, Any] = {}
    own = {f.name for f in dataclasses.fields(cls) if f.init}
    if isinstance(given, _Config):
        values = {name: getattr(given, name) for name in SHARED}
        found = sections()
        for name in found.classes:
            part = given.section(name)
            if name == MemorySettings.SECTION and memory and harness.memory:
                continue
            if found.owners[name] is cls:
                values.update({f.name: getattr(part, f.name) for f in dataclasses.fields(part)})
                continue
            foreign.update({key: name for key in _changed(part)})
    else:
        values = {f.name: getattr(given, f.name) for f in dataclasses.fields(given) if f.name in own}
        where = next((s for s, owner in sections().owners.items() if owner is type(given)), type(given).__name__)
        foreign.update({key: where for key in _changed(given) if key not in own})
    if foreign:
        raise _refusal(foreign, harness)
    return cls(**values)


def memory_for(harness: Any, given: Any) -> MemorySettings | None:
    """The [memory] settings a run plays around `harness` (None: no bank retrieves anything); changed
    memory settings on a harness without the memory capability are refused."""
    part = given.section(MemorySettings.SECTION) if isinstance(given, _Config) else None
    if part is None:
        return None
    if not harness.memory and _changed(part):
        raise _refusal({key: MemorySettings.SECTION for key in _changed(part)}, harness)
    return part if part.active else None


__all__ = [
    "HarnessSettings",
    "MemorySettings",
    "Sections",
    "memory_for",
    "section_key",
    "section_name",
    "sections",
    "settings_for",
]
