"""Things chosen by name (task families, model providers, harnesses, executors, reference policies,
leaderboard boards): one lookup for all.

A `Registry` maps a name to a lazy target, "module:attribute" (optionally with keyword arguments,
bound with functools.partial on load), so choosing one thing never imports the others. Its names
are the package's built-ins plus whatever installed distributions declare in the `tsbench.plugins`
entry-point group, the name namespaced by kind, so an outside package adds one without editing
tsbench:

    # the plugin's pyproject.toml
    [project.entry-points."tsbench.plugins"]
    "family.spikes" = "my_pkg.spikes:SpikeCount"      # a Taskset class or instance
    "provider.myapi" = "my_pkg.api:build_model"       # (name, options) -> ChatModel
    "harness.my-loop" = "my_pkg.loop:Loop"            # a tsbench.harness.Harness subclass (or an episode function)
    "executor.slurm" = "my_pkg.slurm:SlurmExecutor"   # Executor class, called with its options
    "policy.scripted/mine" = "my_pkg.policy:Mine"     # a reference policy (a tsbench.models.base.Agent)
    "board.my-board" = "my_pkg.board:attach"          # leaderboard sections a family names (TaskFamily.boards)

A built-in name wins over a plugin of the same name (the plugin is skipped with a warning), so an
installed package cannot silently replace what a run recorded. An unknown name is a UserError
that lists the choices; so is a target that cannot be imported (a missing optional package, a
plugin's broken module), except a built-in's own bug, which keeps its traceback.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any, NamedTuple

from tsbench.core.errors import UserError

PLUGIN_GROUP = "tsbench.plugins"
KINDS = ("family", "provider", "harness", "executor", "policy", "board")
# how an error names the kind
NOUNS = {
    "family": "task family",
    "provider": "model provider",
    "policy": "reference policy",
    "board": "leaderboard board",
}

log = logging.getLogger(__name__)


class Target(NamedTuple):
    """Where a registered thing lives: `module:attribute`, called with `kwargs` bound when given."""

    module: str
    attribute: str
    kwargs: dict[str, Any]


def _target(value: Any) -> Target:
    """A registry entry: "module:attribute", ("module:attribute", kwargs), or an object (a built-in
    defined beside its registry), whose own module and name are its target."""
    if isinstance(value, Target):
        return value
    kwargs: dict[str, Any] = {}
    if isinstance(value, tuple):
        value, kwargs = value
    if isinstance(value, str):
        if ":" not in value:
            raise ValueError(f"registry target {value!r} is not module:attribute")
        module, attribute = value.split(":", 1)
        return Target(module, attribute, dict(kwargs))
    return Target(value.__module__, value.__qualname__, dict(kwargs))


@functools.cache
def plugin_targets(kind: str) -> dict[str, str]:
    """name -> "module:attribute" of the installed `tsbench.plugins` entry points named `<kind>.<name>`."""
    found: dict[str, str] = {}
    for point in entry_points(group=PLUGIN_GROUP):
        prefix, dot, name = point.name.partition(".")
        if prefix not in KINDS or not dot or not name:
            log.warning(
                "ignoring tsbench plugin %r: its name must be <kind>.<name> with kind one of %s",
                point.name,
                ", ".join(KINDS),
            )
        elif prefix == kind:
            found.setdefault(name, point.value)
    return found


class Registry(Mapping):
    """name -> Target for one kind of thing: built-ins first, then plugins (see the module doc).

    `direct=True` also accepts an unregistered "module:attribute" as a name (task families do).
    """

    def __init__(self, kind: str, builtins: Mapping[str, Any], *, direct: bool = False):
        if kind not in KINDS:
            raise ValueError(f"unknown registry kind {kind!r}")
        self.kind = kind
        self.builtins = {name: _target(value) for name, value in builtins.items()}
        self.direct = direct
        self._found: dict[str, Target] | None = None

    def _plugins(self) -> dict[str, Target]:
        """The installed plugins of this kind, read once per registry (so each warning is said once)."""
        if self._found is not None:
            return self._found
        plugins = {}
        for name, value in plugin_targets(self.kind).items():
            if name in self.builtins:
                log.warning("tsbench plugin %s.%s is shadowed by the built-in of that name", self.kind, name)
                continue
            try:
                plugins[name] = _target(value)
            except ValueError as exc:
                log.warning("ignoring tsbench plugin %s.%s: %s", self.kind, name, exc)
        self._found = plugins
        return plugins

    def __getitem__(self, name: str) -> Target:
        if name in self.builtins:
            return self.builtins[name]
        plugins = self._plugins()
        if name in plugins:
            return plugins[name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        yield from self.builtins
        yield from sorted(self._plugins())

    def __len__(self) -> int:
        return len(self.builtins) + len(self._plugins())

    def names(self) -> list[str]:
        return list(self)

    def choices(self) -> str:
        listed = ", ".join(self)
        return f"{listed} or give module:attribute" if self.direct else listed

    def target(self, name: str) -> Target:
        """The registered target, or (direct registries) `name` read as module:attribute."""
        if name in self:
            return self[name]
        if self.direct and ":" in name:
            return _target(name)
        raise UserError(f"unknown {NOUNS.get(self.kind, self.kind)} {name!r}; choose from {self.choices()}")

    def load(self, name: str) -> Any:
        """The object `name` stands for, imported on first use (kwargs bound with functools.partial)."""
        target = self.target(name)
        try:
            found = importlib.import_module(target.module)
            for part in target.attribute.split("."):
                found = getattr(found, part)
        except (ImportError, AttributeError) as exc:
            if name in self.builtins and not isinstance(exc, ModuleNotFoundError):
                raise  # a built-in that cannot import is a bug in tsbench: its traceback says where
            where = f"{target.module}:{target.attribute}"
            raise UserError(f"cannot load {NOUNS.get(self.kind, self.kind)} {name!r} ({where}): {exc}") from None
        return functools.partial(found, **target.kwargs) if target.kwargs else found
