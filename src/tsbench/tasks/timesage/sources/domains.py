"""Scenario themes per domain for the synthetic source, read from themes.toml: what the table's
columns are called and measure, the issuer's status labels, drivers, components and guidance
stances (two themes per domain, modelled on the paper's Table 10; the numbers are synthetic)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Theme:
    key: str
    domain: str
    title: str
    role: str
    publisher: str
    release: str
    value: str  # the headline column
    value_desc: str
    unit: str
    level: float
    scale: float
    decimals: int
    status_name: str
    labels: tuple[str, ...]  # ordered low -> high
    drivers: tuple[tuple[str, str, str, float, float], ...]  # (column, meaning, unit, level, scale)
    whole: str  # what the components break down
    components: tuple[tuple[str, str], ...]  # (column, name)
    component_level: float
    stances: tuple[str, str, str]  # guidance, low -> high
    guidance: str  # what the guidance is about
    background: str


def _frozen(value: Any) -> Any:
    return tuple(_frozen(x) for x in value) if isinstance(value, list) else value


def load_themes(path: Path = Path(__file__).with_name("themes.toml")) -> dict[str, Theme]:
    with path.open("rb") as file:
        table = tomllib.load(file)
    return {key: Theme(key, **{k: _frozen(x) for k, x in fields.items()}) for key, fields in table.items()}


THEMES: dict[str, Theme] = load_themes()
THEMES_BY_DOMAIN: dict[str, list[str]] = {}
for _theme in THEMES.values():
    THEMES_BY_DOMAIN.setdefault(_theme.domain, []).append(_theme.key)
