"""TimeSage's catalogue and themes are data (catalog.toml, themes.toml): every entry builds for
both views, its tag and rule fit the taxonomy, and the built questions are byte-for-byte those of
the code they replaced (the pinned digest was taken from the `if kind ==` builders, commit a6c7b2d)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from timesage_cases import kind_tags
from tsbench.tasks.timesage.sources.catalog import Vocabulary, build, catalogue
from tsbench.tasks.timesage.sources.domains import THEMES, THEMES_BY_DOMAIN
from tsbench.tasks.timesage.taxonomy import DOMAINS, rule_allowed

FIELDS_DIGEST = "3c12e83882d009f65f1df399a941470483af439f2c580c9e2775825c593088fc"


def vocabulary(issuer: bool, persistence: int) -> Vocabulary:
    theme = THEMES["enso"]
    return Vocabulary(
        value=theme.value,
        value_desc=theme.value_desc,
        unit=theme.unit,
        decimals=theme.decimals,
        status_name=theme.status_name,
        labels=list(theme.labels),
        edges=[-1.0, -0.5, 0.5, 1.0],
        persistence=persistence,
        issuer_status=issuer,
        flat=0.05,
        periods_per_year=52,
        baseline_window=13,
        record_window=104,
        event_baseline=52,
        event_window=6,
        event_z=3.5,
        drivers=[c for c, *_ in theme.drivers],
        components=[c for c, _ in theme.components],
        component_names=[n for _, n in theme.components],
        stances=list(theme.stances),
        guidance_about=theme.guidance,
        period_word="week",
        issuer_view=issuer,
        stakeholders=["exporters", "insurers"],
        event_types=["storm"],
        series=[theme.value, "trade_wind_idx"],
    )


def test_every_entry_builds_in_both_views_and_fits_the_taxonomy():
    built = []
    for issuer, persistence in ((False, 1), (True, 3)):
        v = vocabulary(issuer, persistence)
        for kind in kind_tags():
            spec = build(kind, v)
            assert spec.tag == kind_tags()[kind] and rule_allowed(spec.tag, spec.rule), kind
            assert "{" not in spec.question.replace('{"', "") and "$" not in json.dumps(spec.schema), kind
            if issuer and kind in catalogue()["issuer"]:
                assert spec.derive is None and spec.note.endswith("truth from the withheld release"), kind
            built.append(dataclasses.asdict(spec))
    text = json.dumps(built, sort_keys=False)
    assert "A new status is issued only after 3 consecutive weeks" in text
    assert hashlib.sha256(text.encode()).hexdigest() == FIELDS_DIGEST
    with pytest.raises(ValueError, match="unknown question kind"):
        build("nonsense", vocabulary(False, 1))


def test_themes_are_typed_and_two_per_domain():
    assert {domain: len(keys) for domain, keys in THEMES_BY_DOMAIN.items()} == {d: 2 for d in DOMAINS}
    for theme in THEMES.values():
        assert isinstance(theme.level, float) and isinstance(theme.decimals, int) and len(theme.stances) == 3
        assert all(isinstance(level, float) and isinstance(scale, float) for *_, level, scale in theme.drivers)
        assert len(theme.components) == 4 and theme.labels == tuple(theme.labels)


def test_every_data_file_of_the_package_is_shipped():
    """The catalogue, themes and replay specs are read from files next to the code: pyproject's
    package-data must name each one, or an installed wheel would lack it."""
    root = Path(__file__).resolve().parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["tsbench"]
    package = root / "src" / "tsbench"
    data = [
        p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
    ]
    assert "tasks/timesage/sources/catalog.toml" in data
    assert [f for f in data if not any(fnmatch(f, pattern) for pattern in patterns)] == []
