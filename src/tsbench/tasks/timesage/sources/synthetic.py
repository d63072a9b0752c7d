"""The synthetic source (default): scenario families per domain, planned first, then materialized.

`plan_set(seed, n, periods)` fixes every scenario's domain, theme, cadence, tier, questions and
its own seed without drawing a single value, so a prefix of a larger set is the smaller set.
`materialize(plan)` simulates the table (regimes, trend, seasonality, exogenous drivers,
composition, injected events), the issuer's state and release for every period, and the period
instances. Same seed, same bytes.

The issuer decides some fields from the table by stated rules (the x-rule of each question) and
others by its own judgement (attribution weights the agent does not see, an outlook with noise,
guidance, early status moves in the hard tier), so the withheld release, not the table, decides
those truths; prior releases show how it behaves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tsbench.tasks.timesage import cadence as cal
from tsbench.tasks.timesage.contract import TABLE_FILE, Period, Scenario
from tsbench.tasks.timesage.derive import band_of, derive, status_path
from tsbench.tasks.timesage.sources.catalog import EASY_POOL, HARD_POOL, MEDIUM_POOL, Vocabulary, build, keypoints_for
from tsbench.tasks.timesage.sources.domains import THEMES, THEMES_BY_DOMAIN, Theme
from tsbench.tasks.timesage.sources.instances import Table, assemble, release_name
from tsbench.tasks.timesage.sources.render import release_text, rubric
from tsbench.tasks.timesage.taxonomy import CADENCES, DOMAINS, TIERS

HISTORY = {"monthly": 120, "weekly": 260, "daily": 500, "irregular": 48}
PRIOR_RELEASES = 6  # releases before the first evaluated period that are already public
PERIOD_WORD = {"monthly": "month", "weekly": "week", "daily": "day", "irregular": "release"}
BASELINE = {"monthly": 12, "weekly": 13, "daily": 20, "irregular": 8}
RECORD = {"monthly": 60, "weekly": 104, "daily": 250, "irregular": 24}
EVENT_BASELINE = {"monthly": 36, "weekly": 52, "daily": 60, "irregular": 24}
EVENT_Z = 3.5
CADENCE_SHARE = {"monthly": 39, "weekly": 11, "daily": 5, "irregular": 5}  # the paper's 60 (Fig. 3d)
FULL_SET = 60


@dataclass(frozen=True)
class ScenarioPlan:
    id: str
    index: int
    domain: str
    theme: str
    cadence: str
    tier: str
    n_periods: int
    seed: int
    kinds: tuple[str, ...]
    persistence: int


def _kinds(tier: str, rng: np.random.Generator) -> list[str]:
    if tier == "easy":
        extra = [str(k) for k in rng.choice(EASY_POOL, size=int(rng.integers(0, len(EASY_POOL) + 1)), replace=False)]
        return ["status", *sorted(extra, key=EASY_POOL.index), "summary"]
    if tier == "medium":
        chosen = [str(k) for k in rng.choice(MEDIUM_POOL, size=4, replace=False)]
        if rng.random() < 0.5:
            chosen.insert(0, "status")
        return [*sorted(chosen, key=("status", *MEDIUM_POOL).index), "summary"]
    chosen = [str(k) for k in rng.choice(HARD_POOL, size=5, replace=False)]
    if sum(k != "status" for k in chosen) < 3:
        chosen.append("flagged_periods")
    return [*sorted(set(chosen), key=HARD_POOL.index), "summary", "evidence"]


def _cadences(n: int, rng: np.random.Generator) -> list[str]:
    """The paper's cadence mix; the first four scenarios take one cadence each."""
    first = list(rng.permutation(CADENCES))
    rest = [c for c, count in CADENCE_SHARE.items() for _ in range(count - 1)]
    rest = list(rng.permutation(rest))
    while len(first) + len(rest) < n:
        rest.append(str(rng.choice(CADENCES, p=[CADENCE_SHARE[c] / FULL_SET for c in CADENCES])))
    return [str(c) for c in (first + rest)[:n]]


def plan_set(seed: int, n_scenarios: int = FULL_SET, n_periods: int = 24) -> list[ScenarioPlan]:
    """Blocks of six scenarios, one per domain, two per tier; themes alternate by block."""
    if n_scenarios < 1 or n_periods < 1:
        raise ValueError("need at least one scenario and one period")
    rng = np.random.default_rng([seed, 20260814])
    total = max(n_scenarios, FULL_SET)
    seeds = rng.integers(0, 2**32, size=total)
    cadences = _cadences(total, rng)
    plans = []
    for i in range(n_scenarios):
        block, slot = divmod(i, len(DOMAINS))
        domain = DOMAINS[slot]
        tier = TIERS[(block + slot) % len(TIERS)]
        themes = THEMES_BY_DOMAIN[domain]
        theme = themes[block % len(themes)]
        own = np.random.default_rng([int(seeds[i]), 1])
        kinds = tuple(_kinds(tier, own))
        persistence = int(own.choice([1, 2]) if tier == "easy" else own.choice([1, 2, 3]))
        plans.append(
            ScenarioPlan(
                f"{domain}-{theme.replace('_', '-')}-{cadences[i]}-{i:02d}",
                i,
                domain,
                theme,
                cadences[i],
                tier,
                n_periods,
                int(seeds[i]),
                kinds,
                persistence,
            )
        )
    return plans


def _ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    eps = rng.standard_normal(n) * math.sqrt(1 - phi * phi)
    out = np.empty(n)
    out[0] = rng.standard_normal()
    for t in range(1, n):
        out[t] = phi * out[t - 1] + eps[t]
    return out


@dataclass
class _World:
    """The simulated state behind one scenario (what the issuer knows; the agent sees the table)."""

    theme: Theme
    frame: pd.DataFrame
    beta: np.ndarray
    phi: np.ndarray
    issuer_noise: np.ndarray
    stance_noise: np.ndarray
    sd_change: float


def _simulate(plan: ScenarioPlan, theme: Theme, rng: np.random.Generator) -> _World:
    n = HISTORY[plan.cadence] + plan.n_periods
    ppy = cal.PERIODS_PER_YEAR[plan.cadence]
    days = cal.dates(plan.cadence, n, rng)
    t = np.arange(n)
    phi = rng.uniform(0.85, 0.97, size=len(theme.drivers))
    z = np.stack([_ar1(rng, n, p) for p in phi])
    for row in z:  # occasional jumps in the drivers
        jumps = rng.random(n) < 1 / 80
        row += np.cumsum(jumps * rng.choice([-1.5, 1.5], size=n)) * 0.5
    beta = rng.uniform(0.35, 1.0, size=len(theme.drivers)) * rng.choice([-1.0, 1.0], size=len(theme.drivers))
    season = (
        (plan.cadence != "irregular") * rng.uniform(0.0, 0.6) * np.sin(2 * np.pi * t / ppy + rng.uniform(0, 2 * np.pi))
    )
    trend = rng.uniform(-0.6, 0.6) * t / n
    shifts = np.zeros(n)
    for start in rng.integers(int(0.2 * n), n, size=int(rng.integers(1, 4))):
        shifts[start:] += rng.normal(0.0, 0.8)
    noise = _ar1(rng, n, 0.5) * 0.35
    value = theme.level + theme.scale * (beta @ z + season + trend + shifts + noise)
    change = np.diff(value)
    mad = 1.4826 * float(np.median(np.abs(change - np.median(change))))
    first_event = max(2, HISTORY[plan.cadence] - 24)
    for row in rng.choice(np.arange(first_event, n), size=int(rng.integers(2, 5)), replace=False):
        value[row] += rng.choice([-1.0, 1.0]) * rng.uniform(5.0, 8.0) * mad
    columns: dict[str, Any] = {"date": [cal.label(d, plan.cadence) for d in days], theme.value: value}
    for (col, _, _, level, scale), row in zip(theme.drivers, z):
        columns[col] = level + scale * row
    for col, _ in theme.components:
        base = theme.component_level * rng.uniform(0.5, 1.5)
        columns[col] = base * np.exp(np.cumsum(rng.normal(0.0, 0.03, size=n)))
    return _World(
        theme,
        pd.DataFrame(columns),
        beta,
        phi,
        rng.standard_normal(n),
        rng.random(n),
        float(np.std(np.diff(value[: HISTORY[plan.cadence]]))),
    )


def _vocabulary(plan: ScenarioPlan, theme: Theme, values: np.ndarray, sd_change: float) -> Vocabulary:
    d = theme.decimals
    history = values[: HISTORY[plan.cadence]]
    k = len(theme.labels)
    edges = [round(float(np.quantile(history, i / k)), d) for i in range(1, k)]
    for i in range(1, len(edges)):  # strictly increasing after rounding
        edges[i] = max(edges[i], round(edges[i - 1] + 10**-d, d))
    unit = 10**-d
    flat = round(max(unit, round(0.15 * sd_change, d)) + 0.5 * unit, d + 1)
    return Vocabulary(
        value=theme.value,
        value_desc=theme.value_desc,
        unit=theme.unit,
        decimals=d,
        status_name=theme.status_name,
        labels=list(theme.labels),
        edges=edges,
        persistence=plan.persistence,
        issuer_status=plan.tier == "hard",
        flat=flat,
        periods_per_year=cal.PERIODS_PER_YEAR[plan.cadence],
        baseline_window=BASELINE[plan.cadence],
        record_window=RECORD[plan.cadence],
        event_baseline=EVENT_BASELINE[plan.cadence],
        event_window=5 if plan.cadence == "daily" else 6,
        event_z=EVENT_Z,
        drivers=[c for c, *_ in theme.drivers],
        components=[c for c, _ in theme.components],
        component_names=[name for _, name in theme.components],
        stances=list(theme.stances),
        guidance_about=theme.guidance,
        period_word=PERIOD_WORD[plan.cadence],
    )


def _direction(delta: float, flat: float) -> str:
    return "up" if delta > flat else "down" if delta < -flat else "flat"


def issuer_states(
    plan: ScenarioPlan, world: _World, table: Table, v: Vocabulary, rows: range
) -> dict[int, dict[str, Any]]:
    """What the issuer says in each release (rows = the releases' rows)."""
    theme, frame = world.theme, table.frame
    x = frame[theme.value].to_numpy(dtype=float)
    rule_status = status_path(x, v.edges, v.labels, v.persistence)
    ppy = v.periods_per_year
    drivers = [(col, level, scale) for col, _, _, level, scale in theme.drivers]
    comps = {"columns": v.components, "names": v.component_names}
    flag_rule = {
        "kind": "flag_events",
        "column": theme.value,
        "window": v.event_window,
        "baseline": v.event_baseline,
        "z": v.event_z,
    }
    guidance_horizon = 2 + plan.seed % 2
    states = {}
    for r in rows:
        upto = frame.iloc[: r + 1]
        change = x[r] - x[r - 1]
        deltas = {col: float(frame[col].iloc[r] - frame[col].iloc[r - 1]) for col, _, _ in drivers}
        contrib = {col: world.beta[i] * theme.scale / scale * deltas[col] for i, (col, _, scale) in enumerate(drivers)}
        order = sorted(contrib, key=lambda c: (-abs(contrib[c]), c))
        primary = order[0]
        secondary = [c for c in order[1:] if abs(contrib[c]) >= 0.35 * abs(contrib[primary])][:2]
        z_now = {col: (float(frame[col].iloc[r]) - level) / scale for col, level, scale in drivers}
        forecast = (
            sum(
                world.beta[i] * theme.scale * (world.phi[i] - 1.0) * z_now[col] for i, (col, _, _) in enumerate(drivers)
            )
            + 0.3 * change
        )
        forecast += world.issuer_noise[r] * 0.3 * world.sd_change
        outlook = _direction(forecast, v.flat)
        raw = band_of(x[r], v.edges, v.labels)
        status = rule_status[r]
        if v.issuer_status and raw != status:
            toward_up = v.labels.index(raw) > v.labels.index(status)
            if (outlook == "up" and toward_up) or (outlook == "down" and not toward_up):
                status = raw
        position = v.labels.index(status) / max(1, len(v.labels) - 1)
        stance = 1 + (position >= 0.66 and outlook == "up") - (position <= 0.34 and outlook == "down")
        if world.stance_noise[r] < 0.1:
            stance = min(2, stance + 1) if outlook == "up" else max(0, stance - 1) if outlook == "down" else stance
        risks = sorted((c for c in z_now if abs(z_now[c]) > 1.0), key=lambda c: (-abs(z_now[c]), c))[:3]
        states[r] = {
            "label": str(frame["date"].iloc[r]),
            "release": theme.release,
            "publisher": theme.publisher,
            "provenance": f"Synthetic release rendered by tsbench from the scenario state (seed {plan.seed}).",
            "status_name": theme.status_name,
            "status": status,
            "value": theme.value,
            "value_desc": theme.value_desc,
            "unit": theme.unit,
            "decimals": theme.decimals,
            "latest": float(x[r]),
            "previous": float(x[r - 1]),
            "change": float(change),
            "direction": _direction(change, v.flat),
            "yoy_reference": str(frame["date"].iloc[r - ppy]),
            "yoy_direction": _direction(x[r] - x[r - ppy], v.flat),
            "whole": theme.whole,
            "shares": derive(upto, {"kind": "shares", **comps, "decimals": 1}),
            "dominant": derive(upto, {"kind": "dominant", **comps}),
            "drivers": [(col, f"{frame[col].iloc[r]:.2f}", deltas[col]) for col, _, _ in drivers],
            "primary": primary,
            "secondary": secondary,
            "flagged": derive(upto, flag_rule),
            "event_window": v.event_window,
            "outlook_direction": outlook,
            "regime": band_of(x[r] + forecast, v.edges, v.labels),
            "probability": int(5 * round((50 + 40 * math.tanh(abs(forecast) / world.sd_change)) / 5)),
            "outlook_horizon": 3,
            "guidance_about": theme.guidance,
            "stance": v.stances[int(stance)],
            "guidance_horizon": guidance_horizon,
            "risks": [
                {
                    "risk": f"{c}_{'upside' if z_now[c] > 0 else 'downside'}",
                    "evidence": f"{c} at {frame[c].iloc[r]:.2f} in {frame['date'].iloc[r]}",
                }
                for c in risks
            ],
        }
    return states


ISSUER_FIELDS = {
    "status": lambda s: s["status"],
    "primary_driver": lambda s: s["primary"],
    "secondary_drivers": lambda s: sorted(s["secondary"]),
    "guidance": lambda s: {"stance": s["stance"], "horizon": s["guidance_horizon"]},
    "risks": lambda s: s["risks"],
    "outlook_direction": lambda s: s["outlook_direction"],
    "outlook": lambda s: {"regime": s["regime"], "probability": s["probability"], "horizon": s["outlook_horizon"]},
}


def materialize(plan: ScenarioPlan) -> tuple[Scenario, list[Period]]:
    theme = THEMES[plan.theme]
    rng = np.random.default_rng([plan.seed, 2])
    world = _simulate(plan, theme, rng)
    decimals = {theme.value: theme.decimals, **{c: 2 for c, *_ in theme.drivers}, **{c: 1 for c, _ in theme.components}}
    table = Table.from_frame(world.frame, decimals)
    values = table.frame[theme.value].to_numpy(dtype=float)
    v = _vocabulary(plan, theme, values, world.sd_change)
    fields = [build(kind, v) for kind in plan.kinds]
    columns = {"date": "release period label", theme.value: f"{theme.value_desc} ({theme.unit})"}
    columns.update({col: f"{meaning} ({unit})" for col, meaning, unit, _, _ in theme.drivers})
    columns.update({col: f"{theme.whole}: {name}" for col, name in theme.components})
    background = (
        f"{theme.background} {theme.publisher} publishes a {theme.release} every {v.period_word}; "
        f"{TABLE_FILE} holds {theme.value_desc} ({theme.value}, {theme.unit}), its drivers "
        f"({', '.join(v.drivers)}) and {theme.whole} ({', '.join(v.components)}). "
        f"Synthetic scenario generated by tsbench (seed {plan.seed})."
    )
    units = [theme.unit] + ([theme.unit.split()[0]] if " " in theme.unit else [])
    quality = rubric(
        plan.tier,
        status_name=theme.status_name,
        labels=list(theme.labels),
        units=units,
        drivers=v.drivers,
        components=v.component_names,
        has_status="status" in plan.kinds,
    )
    scenario = Scenario(
        id=plan.id,
        source="synthetic",
        domain=plan.domain,
        cadence=plan.cadence,
        tier=plan.tier,
        role=theme.role,
        publisher=theme.publisher,
        release_name=theme.release,
        background=background,
        columns=columns,
        fields=fields,
        keypoints=keypoints_for(fields, theme.status_name, plan.tier),
        quality=quality,
    )
    first = HISTORY[plan.cadence]
    release_rows = range(first - PRIOR_RELEASES, first + plan.n_periods)
    states = issuer_states(plan, world, table, v, release_rows)
    releases = {r: (release_name(states[r]["label"]), release_text(states[r])) for r in release_rows}

    def truth_at(row: int) -> dict[str, Any]:
        upto = table.frame.iloc[: row + 1]
        truth = {}
        for spec in fields:
            if not spec.in_accuracy:
                truth[spec.name] = None
            elif spec.derive is not None:
                truth[spec.name] = derive(upto, spec.derive)
            else:
                truth[spec.name] = ISSUER_FIELDS[spec.name](states[row])
        return truth

    def keypoints_at(row: int, truth: dict[str, Any]) -> dict[str, Any]:
        out = {kp.id: truth.get(kp.field) for kp in scenario.keypoints if kp.field is not None}
        if any(kp.id == "kp_prior" for kp in scenario.keypoints):
            previous = states[row - 1]
            out["kp_prior"] = previous["status"] if plan.tier == "medium" else previous["primary"]
        return out

    return scenario, assemble(scenario, table, releases, first, plan.n_periods, truth_at, keypoints_at)
