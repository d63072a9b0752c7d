"""Harness settings: the ones every harness reads, and each harness's own, read once the harness is chosen.

A harness's settings class subclasses `HarnessSettings` (or another harness's settings class: rlm-budget's
may extend rlm's) and declares its own fields with `setting(...)`; the harness receives an instance of
exactly that class (`Harness[S]`, harness/base.py). A run's config holds the harness's name and that one
object. Its values come from the shared fields, the tables the harness reads ([eval.<its name>] and the
SECTION of its settings class or any base: [eval.rlm] for rlm-budget too), `-H key=value` and the flags;
`harness_settings` builds it once, and a setting of another harness is refused in one line naming whose
it is. `MemorySettings` is the section of TimeClaw's memory wrapper, which plays around a harness that
declares the `memory` capability.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from tsbench.core.errors import UserError
from tsbench.core.settings import setting

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
MEMORY = MemorySettings.SECTION


def own_settings(cls: type) -> list[str]:
    """The fields a settings class adds to the shared ones (its bases' own included)."""
    return [f.name for f in dataclasses.fields(cls) if f.name not in SHARED and f.init]


def _key(name: str) -> str:
    return str(name).replace("-", "_")


def tables_read(harness: Any) -> tuple[str, ...]:
    """The TOML tables `harness` reads its own settings from: its name, then each SECTION its settings class
    or a base declares (rlm-budget reads [eval.rlm-budget] and [eval.rlm])."""
    names = [harness.name] if harness.name else []
    for cls in harness.settings_class.__mro__:
        if (section := cls.__dict__.get("SECTION")) and section not in names:
            names.append(section)
    return tuple(names)


def section_name(harness: Any) -> str:
    """The table a harness's own settings are shown under: its settings class's SECTION, else its name."""
    return harness.settings_class.__dict__.get("SECTION") or harness.name


def _others(exclude: str) -> list[Any]:
    """Every other registered harness that loads here (for naming whose a refused setting is)."""
    from tsbench.harness.registry import HARNESSES, get_harness

    found = []
    for name in HARNESSES:
        if name == exclude:
            continue
        try:
            found.append(get_harness(name))
        except UserError as exc:
            log.warning("harness %s does not load here: %s", name, exc)
    return found


def whose(key: str, exclude: str = "") -> tuple[str, list[str]] | None:
    """(the table, the harnesses that read it) of a setting another harness has, or None."""
    if key in {f.name for f in dataclasses.fields(MemorySettings)}:
        return MEMORY, [h.name for h in _others(exclude) if h.memory]
    players = [h for h in _others(exclude) if key in own_settings(h.settings_class)]
    if not players:
        return None
    declared = next(c for c in players[0].settings_class.__mro__ if key in c.__dict__.get("__annotations__", {}))
    return declared.__dict__.get("SECTION") or players[0].name, [h.name for h in players]


def _refusal(keys: list[str], harness: Any, where: str) -> UserError:
    from tsbench.core.settings import suggest

    lines = []
    for key in keys:
        found = whose(key, harness.name)
        if found is None:
            known = [*SHARED, *own_settings(harness.settings_class)]
            lines.append(f"unknown setting {key}{suggest(key, known)} ({where})")
            continue
        section, players = found
        why = f"which harness {harness.name} does not have"
        if section == MEMORY and harness.memory:
            why = f"and the memory wrapper is not played around harness {harness.name} here"
        elif players:
            why += f" (it is read by {', '.join(players)})"
        lines.append(f"{key} (--{key.replace('_', '-')}) is a setting of [{section}], {why}")
    return UserError("; ".join(lines))


def _changed(table: dict[str, Any], cls: type) -> list[str]:
    """Keys of a table that differ from `cls`'s defaults (an other harness's table left at them is harmless)."""
    defaults = {f.name: getattr(cls(), f.name) for f in dataclasses.fields(cls)}
    return [key for key, value in table.items() if key not in defaults or defaults[key] != value]


def _left_at_default(key: str, value: Any, exclude: str) -> bool:
    """Whether `value` is the default of the setting `key` of another harness (or of [memory]): a setting
    that changes nothing is no reason to refuse a run (inspect's -T depth=0 on single-pass-text)."""
    from tsbench.core.settings import convert, spec_map

    owners = [MemorySettings, *(h.settings_class for h in _others(exclude))]
    for cls in owners:
        if (spec := spec_map(cls).get(key)) is not None and key not in SHARED:
            try:
                return convert(spec, value) == spec.default
            except UserError:
                return False
    return False


def harness_settings(harness: Any, values: dict[str, Any], *, where: str = "setting", base: Any = None) -> Any:
    """`harness`'s own settings (an instance of its settings class), built once from `values`: shared and own
    settings by name, and tables ({"rlm": {...}}) of which those `harness` reads are its own. `base` (shared
    settings already built, or an instance) gives the starting values. A setting of another harness changed
    from its default is refused in one line; so is an unknown key."""
    from tsbench.core.config import build

    cls = harness.settings_class
    read = {_key(name) for name in tables_read(harness)}
    own = {f.name for f in dataclasses.fields(cls)}
    flat: dict[str, Any] = {}
    foreign: list[str] = []
    for key, value in values.items():
        key = _key(key)
        if isinstance(value, dict):  # a table: its own, or another harness's (refused only where it changes one)
            if key in read:
                for inner, setting_value in value.items():
                    inner = _key(inner)
                    if inner in own:
                        flat[inner] = setting_value
                    else:
                        foreign.append(inner)
                continue
            other = next((h for h in _others(harness.name) if key in {_key(n) for n in tables_read(h)}), None)
            if other is None:
                raise UserError(f"unknown table [{key.replace('_', '-')}] ({where})")
            foreign += _changed({_key(k): v for k, v in value.items()}, other.settings_class)
        elif key in own:
            flat[key] = value
        elif not _left_at_default(key, value, harness.name):
            foreign.append(key)
    if foreign:
        raise _refusal(foreign, harness, where)
    start = as_settings(harness, base) if base is not None else None
    return build(cls, flat, where=where, base=start)


def as_settings(harness: Any, given: Any) -> Any:
    """`given` (a HarnessSettings of any class) as `harness`'s own settings class: the shared values and any
    own ones kept; a changed setting of another class is refused in one line."""
    cls = harness.settings_class
    if type(given) is cls:
        return given
    own = {f.name for f in dataclasses.fields(cls) if f.init}
    default = type(given)()
    foreign = [
        f.name
        for f in dataclasses.fields(given)
        if f.name not in own and getattr(given, f.name) != getattr(default, f.name)
    ]
    if foreign:
        raise _refusal(foreign, harness, "setting")
    return cls(**{f.name: getattr(given, f.name) for f in dataclasses.fields(given) if f.name in own})


def memory_for(harness: Any, memory: MemorySettings | None) -> MemorySettings | None:
    """The [memory] settings a run plays around `harness` (None: no bank retrieves anything); changed
    memory settings on a harness without the memory capability are refused."""
    if memory is None:
        return None
    if not harness.memory and (changed := _changed(dataclasses.asdict(memory), MemorySettings)):
        raise _refusal(changed, harness, "setting")
    return memory if memory.active else None


def split_values(cls: type, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what a run config `cls` holds itself, what is its harness's: own settings by name and harness tables).
    The old nested spelling [eval.harness_config.rlm] is read as [eval.rlm]."""
    from tsbench.core.config import field_names
    from tsbench.core.settings import specs

    known = field_names(cls) | {  # old spellings (`steps` for max_steps): `build_fields` folds them
        alias.lstrip("-").replace("-", "_")
        for spec in specs(cls)
        for alias in spec.meta.get("aliases") or ()
        if len(alias) > 2
    }
    mine: dict[str, Any] = {}
    theirs: dict[str, Any] = {}
    values = {_key(k): v for k, v in values.items()}
    old = values.pop("harness_config", None)
    if old is not None and not isinstance(old, dict):
        raise UserError(f"harness_config is a table of settings, got {old!r}")
    for key, value in {**{_key(k): v for k, v in (old or {}).items()}, **values}.items():
        if key == MEMORY and isinstance(value, dict):
            mine.setdefault(MEMORY, {}).update(value)
        elif key in known and not (isinstance(value, dict) and key not in _nested_names(cls)):
            if key in SHARED and old and key in {_key(k) for k in old}:
                mine.setdefault("harness_config", {})[key] = value
            else:
                mine[key] = value
        else:
            theirs[key] = value
    return mine, theirs


def _nested_names(cls: type) -> set[str]:
    from tsbench.core.settings import nested

    return set(nested(cls))


def build_run(cls: type, values: dict[str, Any], *, where: str = "setting") -> Any:
    """A run config (`cls` has `harness`, `harness_config` and `memory` fields) from TOML and flag values: its
    own settings first; then, where it names its harness, that harness's settings, built once. A run whose
    harness is chosen later (by the family or the agent) keeps them as given in `harness_args`, and an unknown
    key among them is refused now."""
    from tsbench.core.config import build_fields, field_names
    from tsbench.harness.registry import get_harness

    mine, theirs = split_values(cls, values)
    cfg = build_fields(cls, mine, where=where)
    if cfg.harness:
        harness = get_harness(cfg.harness)
        cfg.harness_config = harness_settings(harness, theirs, where=where, base=cfg.harness_config)
        return cfg  # [memory] is checked where the run plays its harness (memory_for)
    from tsbench.core.settings import suggest

    for key, value in theirs.items():
        if not isinstance(value, dict) and whose(key) is None:
            known = field_names(cls) | {name for h in _others("") for name in own_settings(h.settings_class)}
            raise UserError(f"unknown setting {key}{suggest(key, known)} ({where})")
    cfg.harness_args = theirs
    return cfg


__all__ = [
    "HarnessSettings",
    "MemorySettings",
    "as_settings",
    "build_run",
    "harness_settings",
    "memory_for",
    "own_settings",
    "split_values",
    "section_name",
    "tables_read",
]
