"""What the synthetic issuer knows and says each period, beyond the table.

The medium tier asks for change, composition and event analysis as the issuer reports them, and
that needs more than the table (paper Sec. 3.2, Step V: medium = temporal pattern identification
grounded in the releases):
- changes, trends, records and ranks are of the *adjusted* figure: table value minus the
  seasonal and calendar adjustment that each release announces for the next period, so the
  previous release must be read;
- the baseline is the reference level the previous release declares for this period;
- composition is by contribution, component values times weights stated only in the brief;
- events are announced in advance in releases (type and period); the issuer names an announced
  event by its type and flags as unusual only the changes no release announced.
The hard tier adds the issuer's judgement (attribution with hidden weights, stakeholders,
guidance, conditional outlook), learnable only from how prior releases behaved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tsbench.tasks.timesage.derive import band_of, direction_of, robust_z, status_path
from tsbench.tasks.timesage.sources.catalog import Vocabulary

EVENT_TYPES = ("scheduled_maintenance", "policy_change", "reporting_change", "weather_disruption")
STAKEHOLDERS = {
    "agriculture": ("farmers", "processors", "exporters", "retailers", "consumers", "lenders"),
    "climate": ("farmers", "water_utilities", "insurers", "emergency_services", "fisheries", "power_grids"),
    "energy": ("households", "refiners", "utilities", "industry", "traders", "regulators"),
    "finance": ("borrowers", "savers", "banks", "exporters", "investors", "government"),
    "healthcare": ("hospitals", "clinics", "patients", "insurers", "public_health_officers", "pharmacies"),
    "transportation": ("airlines", "shippers", "commuters", "freight_operators", "port_authorities", "travellers"),
}
# the release's threshold for an unusual move in any series of the table (stated in the brief); at 1.5 a
# release lists about one series a period, so an empty list is not the usual answer that copying repeats
SERIES_Z = 1.5
RECORD_WINDOW = 7  # this release and the six before it: all published and visible at period 1


@dataclass
class IssuerBook:
    """The issuer's own numbers behind every release (arrays over all table rows)."""

    adjustment: np.ndarray  # length n + 1: the adjustment of row t is announced in release t-1
    weights: dict[str, float]  # component column -> contribution weight (stated in the brief)
    events: dict[int, tuple[str, int]]  # event row -> (type, row of the release that announced it)
    stakeholders: dict[tuple[str, bool], str]  # (driver column, it rose) -> the stakeholder group it affects
    first_release: int  # the first row with a visible release


def plan_events(rng: np.random.Generator, first_release: int, first_event: int, n: int) -> dict[int, tuple[str, int]]:
    """Announced events every 1-4 rows from `first_event`, each announced 1-3 releases ahead. Consecutive
    periods can both carry one (a maintenance after a policy change), so "none" is not the answer most
    periods share and repeating last period's event class is right less often."""
    events = {}
    row = first_event + int(rng.integers(0, 3))
    while row < n:
        lead = int(rng.integers(1, 4))
        events[row] = (str(rng.choice(EVENT_TYPES)), max(first_release, row - lead))
        row += int(rng.integers(1, 5))
    return events


def adjustments(rng: np.random.Generator, n: int, ppy: int, seasonal: bool, sd: float, decimals: int) -> np.ndarray:
    """The issuer's additive seasonal / calendar adjustment per row (plus one row ahead)."""
    t = np.arange(n + 1)
    amp = rng.uniform(0.8, 2.0) * sd
    wave = amp * np.sin(2 * np.pi * t / ppy + rng.uniform(0, 2 * np.pi)) if seasonal else 0.0
    return np.round(wave + rng.normal(0.0, 0.4 * sd, size=n + 1), decimals)


@dataclass
class IssuerInputs:
    """What `issuer_states` needs of the simulated world and the scenario's vocabulary."""

    x: np.ndarray  # the headline column as the table shows it
    frame: Any  # the parsed table
    v: Vocabulary  # the scenario's bands, flat band, windows, components and stances
    decimals: int
    drivers: list[tuple[str, float, float]]  # (column, level, scale)
    beta: np.ndarray
    phi: np.ndarray
    issuer_noise: np.ndarray
    stance_noise: np.ndarray
    sd_change: float
    scale: float
    guidance_horizon: int
    extra: dict[str, Any] = field(default_factory=dict)


def own_call(rule: str, held: str, band: str, expected: str) -> str:
    """The issuer's status (spec example: "a persistence rule ... and its own outlook"): the band rule's
    status, except that a move is issued only when its outlook expects the new band to hold (else it
    holds `held`), and a move the persistence rule still withholds is issued early when its outlook
    expects the new band (`expected`: the band of the value it forecasts) to hold."""
    if rule != held and expected != rule:
        return held
    if rule == held and band != held and expected == band:
        return band
    return rule


def issuer_states(w: IssuerInputs, book: IssuerBook, rows: range) -> dict[int, dict[str, Any]]:
    """The facts each release states (rows = the releases' rows)."""
    x, frame, d, v = w.x, w.frame, w.decimals, w.v
    dates = frame["date"].astype(str).tolist()
    sa = np.round(x - book.adjustment[: len(x)], d)
    diffs = np.diff(x)
    rule_status = status_path(x, v.edges, v.labels, v.persistence)
    names = dict(zip(v.components, v.component_names))

    def unusual(t: int) -> bool:
        return abs(robust_z(diffs, t - 1, v.event_baseline)) > v.event_z

    series = w.extra.get("series", [])
    series_diffs = {c: np.diff(frame[c].to_numpy(dtype=float)) for c in series}

    def moved(r: int) -> list[str]:
        out = [c for c in series if abs(robust_z(series_diffs[c], r - 1, v.event_baseline)) > SERIES_Z]
        headline = series[0] if series else None
        return sorted(c for c in out if not (c == headline and r in book.events))

    def reference(t: int) -> float:
        return round(float(np.mean(sa[t - 13 : t])), d)

    states = {}
    for r in rows:
        change = x[r] - x[r - 1]
        adj_change = round(float(sa[r] - sa[r - 1]), d)
        adj_dir = direction_of(adj_change, v.flat)
        run = 1
        while r - run >= book.first_release and direction_of(sa[r - run] - sa[r - run - 1], v.flat) == adj_dir:
            run += 1
        window = sa[r - RECORD_WINDOW + 1 : r + 1]
        contrib = {c: book.weights[c] * float(frame[c].iloc[r]) for c in v.components}
        total = sum(contrib.values())
        shares = {names[c]: round(100.0 * value / total, 1) for c, value in contrib.items()}
        ordered = sorted(contrib, key=lambda c: (-contrib[c], c))
        deltas = {col: float(frame[col].iloc[r] - frame[col].iloc[r - 1]) for col, _, _ in w.drivers}
        pull = {col: w.beta[i] * w.scale / scale * deltas[col] for i, (col, _, scale) in enumerate(w.drivers)}
        order = sorted(pull, key=lambda c: (-abs(pull[c]), c))
        primary = order[0]
        secondary = sorted(c for c in order[1:] if abs(pull[c]) >= 0.5 * abs(pull[primary]))[:2]
        z_now = {col: (float(frame[col].iloc[r]) - level) / scale for col, level, scale in w.drivers}
        forecast = (
            sum(w.beta[i] * w.scale * (w.phi[i] - 1.0) * z_now[col] for i, (col, _, _) in enumerate(w.drivers))
            + 0.3 * change
        )
        forecast += w.issuer_noise[r] * 0.3 * w.sd_change
        outlook = direction_of(forecast, v.flat)
        status = rule_status[r]
        if v.issuer_status:
            status = own_call(
                rule_status[r],
                states[r - 1]["status"] if r - 1 in states else rule_status[r - 1],
                band_of(x[r], v.edges, v.labels),
                band_of(x[r] + forecast, v.edges, v.labels),
            )
        probability = int(5 * round((50 + 40 * math.tanh(abs(forecast) / w.sd_change)) / 5))
        # guidance follows the outlook (a weak one: hold), for longer when the issuer is more confident
        stance = 1 if w.stance_noise[r] < 0.15 else {"up": 2, "down": 0, "flat": 1}[outlook]
        horizon = w.guidance_horizon + (probability >= 70)
        z_prev = {col: (float(frame[col].iloc[r - 1]) - level) / scale for col, level, scale in w.drivers}
        # the risks: drivers away from normal and moving further away this period
        risks = sorted(
            (c for c in z_now if abs(z_now[c]) > 0.75 and abs(z_now[c]) > abs(z_prev[c])),
            key=lambda c: (-abs(z_now[c]), c),
        )[:3]
        named = [primary, *secondary]
        event = book.events.get(r)
        states[r] = {
            "label": dates[r],
            "status": status,
            "latest": float(x[r]),
            "previous": float(x[r - 1]),
            "change": float(change),
            "direction": direction_of(change, v.flat),
            "adjusted": float(sa[r]),
            "adjustment": float(book.adjustment[r]),
            "next_adjustment": float(book.adjustment[r + 1]),
            "adj_change": adj_change,
            "adj_direction": adj_dir,
            "adj_trend_3": round(float(sa[r] - sa[r - 3]), d),
            "adj_run": run,
            "reference": reference(r),
            "next_reference": reference(r + 1),
            "deviation": round(float(sa[r]) - reference(r), d),
            "record": bool(sa[r] >= window.max()),  # the question asks for the highest (ties count)
            "record_kind": "high" if sa[r] >= window.max() else "low" if sa[r] <= window.min() else None,
            "rank": int((window > sa[r]).sum()) + 1,
            "yoy_reference": dates[r - v.periods_per_year],
            "yoy_direction": direction_of(x[r] - x[r - v.periods_per_year], v.flat),
            "shares": shares,
            "top": sorted(names[c] for c in ordered[:2]),
            "dominant": names[ordered[0]],
            "major": sorted(names[c] for c in v.components if 100.0 * contrib[c] / total >= 25.0),
            "notices": sorted((t, dates[e]) for e, (t, a) in book.events.items() if a == r and e > r),
            "event": event[0] if event else None,
            "event_class": event[0] if event else "unannounced" if unusual(r) else "none",
            "flagged": sorted(
                dates[k] for k in range(r - v.event_window + 1, r + 1) if unusual(k) and k not in book.events
            ),
            "unusual_series": moved(r) if series else [],
            "drivers": [(col, f"{frame[col].iloc[r]:.2f}", deltas[col]) for col, _, _ in w.drivers],
            "primary": primary,
            "secondary": secondary,
            "cause": f"{primary} {'rose' if deltas[primary] > 0 else 'fell'}",
            "drivers_evidence": [
                {"driver": c, "evidence": f"{c} at {frame[c].iloc[r]:.2f} ({deltas[c]:+.2f})"} for c in named
            ],
            "stakeholders": [book.stakeholders[(primary, deltas[primary] > 0)]],
            "outlook_direction": outlook,
            "regime": band_of(x[r] + forecast, v.edges, v.labels),
            "probability": probability,
            "outlook_horizon": 3,
            "stance": v.stances[int(stance)],
            "guidance_horizon": horizon,
            "conditional": {  # if the primary driver keeps moving this way, where the headline goes
                "if_driver": primary,
                "if_direction": "up" if deltas[primary] > 0 else "down",
                "then_direction": "up" if pull[primary] > 0 else "down",
            },
            "risks": [
                {
                    "risk": f"{c}_{'upside' if z_now[c] > 0 else 'downside'}",
                    "evidence": f"{c} at {frame[c].iloc[r]:.2f} in {dates[r]}",
                }
                for c in risks
            ],
            **w.extra,
        }
    return states


# field name -> the release's statement that is its truth
ISSUER_FIELDS = {
    "status": lambda s: s["status"],
    "change": lambda s: s["adj_change"],
    "change_direction": lambda s: s["adj_direction"],
    "trend_3": lambda s: s["adj_trend_3"],
    "run_length": lambda s: s["adj_run"],
    "vs_baseline": lambda s: s["deviation"],
    "is_record": lambda s: s["record"],
    "rank": lambda s: s["rank"],
    "top_components": lambda s: s["top"],
    "dominant_component": lambda s: s["dominant"],
    "component_shares": lambda s: s["shares"],
    "major_components": lambda s: s["major"],
    "flagged_periods": lambda s: s["flagged"],
    "flagged_series": lambda s: s["unusual_series"],
    "event_type": lambda s: s["event_class"],
    "cause": lambda s: s["cause"],
    "primary_driver": lambda s: s["primary"],
    "secondary_drivers": lambda s: sorted(s["secondary"]),
    "drivers_evidence": lambda s: s["drivers_evidence"],
    "stakeholders": lambda s: s["stakeholders"],
    "guidance": lambda s: {"stance": s["stance"], "horizon": s["guidance_horizon"]},
    "yoy_comparison": lambda s: {"reference": s["yoy_reference"], "direction": s["yoy_direction"]},
    "risks": lambda s: s["risks"],
    "outlook_direction": lambda s: s["outlook_direction"],
    "outlook": lambda s: {"regime": s["regime"], "probability": s["probability"], "horizon": s["outlook_horizon"]},
    "conditional_outlook": lambda s: s["conditional"],
}
