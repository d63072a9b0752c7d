"""Scenario themes per domain for the synthetic source: what the table's columns are called and
measure, the issuer's status labels, drivers, components and guidance stances.

Two themes per domain, modelled on the kinds of institutional releases the paper tracks (Table 10);
the numbers are synthetic. Levels and scales set the table's plausible magnitudes.
"""

from __future__ import annotations

from dataclasses import dataclass


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


THEMES: dict[str, Theme] = {
    t.key: t
    for t in (
        Theme(
            "cold_storage",
            "agriculture",
            "Cold storage stocks",
            "agricultural market analyst",
            "Synthetic Agricultural Statistics Service",
            "cold storage report",
            "stocks_mlb",
            "total frozen meat stocks",
            "million lb",
            1200.0,
            60.0,
            1,
            "stock position",
            ("tight", "balanced", "ample"),
            (
                ("slaughter_idx", "slaughter activity index", "index", 100.0, 6.0),
                ("export_idx", "export demand index", "index", 100.0, 8.0),
                ("wholesale_usd", "wholesale meat price", "USD/cwt", 210.0, 12.0),
            ),
            "stocks by product",
            (("beef_mlb", "beef"), ("pork_mlb", "pork"), ("poultry_mlb", "poultry"), ("other_mlb", "other meats")),
            300.0,
            ("lower", "unchanged", "raise"),
            "the production forecast",
            "Cold storage holdings signal whether meat supply is tight or ample; processors and exporters plan "
            "purchases on each release.",
        ),
        Theme(
            "crop_condition",
            "agriculture",
            "Crop condition",
            "crop progress analyst",
            "Synthetic Crop Reporting Board",
            "crop progress report",
            "good_excellent_pct",
            "share of the crop rated good or excellent",
            "%",
            62.0,
            6.0,
            1,
            "condition rating",
            ("poor", "fair", "good", "excellent"),
            (
                ("precip_anom_mm", "precipitation anomaly", "mm", 0.0, 18.0),
                ("temp_anom_c", "temperature anomaly", "degC", 0.0, 1.2),
                ("soil_moisture_idx", "topsoil moisture index", "index", 50.0, 9.0),
            ),
            "acres rated good or better by region",
            (("north_kac", "north"), ("central_kac", "central"), ("south_kac", "south"), ("west_kac", "west")),
            900.0,
            ("lower", "unchanged", "raise"),
            "the yield forecast",
            "The weekly condition rating tracks crop health through the season; traders and insurers adjust "
            "yield expectations on each release.",
        ),
        Theme(
            "enso",
            "climate",
            "Ocean index monitoring",
            "operational climate analyst",
            "Synthetic Climate Prediction Office",
            "ocean index diagnostic discussion",
            "sst_anom",
            "sea-surface temperature anomaly, 3-period running mean",
            "degC",
            0.0,
            0.7,
            2,
            "alert status",
            ("cool_advisory", "cool_watch", "neutral", "warm_watch", "warm_advisory"),
            (
                ("trade_wind_idx", "equatorial trade wind index", "m/s", 0.0, 1.0),
                ("subsurface_heat", "upper-ocean heat content anomaly", "degC", 0.0, 0.6),
                ("olr_anom", "outgoing longwave radiation anomaly", "W/m2", 0.0, 8.0),
            ),
            "heat content by region",
            (
                ("west_pac", "west Pacific"),
                ("central_pac", "central Pacific"),
                ("east_pac", "east Pacific"),
                ("coastal", "coastal"),
            ),
            40.0,
            ("stand_down", "maintain", "escalate"),
            "the alert posture",
            "A recurring ocean index drives a public alert status; downstream sectors act on it, but the "
            "signal is uncertain and shifts every release.",
        ),
        Theme(
            "drought",
            "climate",
            "Drought monitor",
            "drought monitoring analyst",
            "Synthetic Drought Mitigation Center",
            "drought monitor summary",
            "drought_area_pct",
            "share of the region in drought",
            "%",
            28.0,
            7.0,
            1,
            "drought category",
            ("none", "abnormally_dry", "moderate", "severe", "extreme"),
            (
                ("precip_deficit_mm", "precipitation deficit", "mm", 0.0, 15.0),
                ("temp_anom_c", "temperature anomaly", "degC", 0.0, 1.1),
                ("evap_demand_mm", "evaporative demand", "mm", 40.0, 6.0),
            ),
            "area by drought intensity",
            (("d1_kkm2", "moderate"), ("d2_kkm2", "severe"), ("d3_kkm2", "extreme"), ("d4_kkm2", "exceptional")),
            120.0,
            ("relax", "maintain", "expand"),
            "water-use restrictions",
            "The drought summary classifies how much of the region is in drought; water managers set "
            "restrictions from it.",
        ),
        Theme(
            "crude_stocks",
            "energy",
            "Crude oil inventories",
            "petroleum market analyst",
            "Synthetic Energy Information Office",
            "petroleum status report",
            "crude_stocks_mb",
            "commercial crude oil inventories",
            "million barrels",
            440.0,
            14.0,
            1,
            "inventory position",
            ("below_range", "within_range", "above_range"),
            (
                ("refinery_runs_mbd", "refinery crude runs", "million b/d", 16.0, 0.6),
                ("imports_mbd", "crude imports", "million b/d", 6.5, 0.5),
                ("exports_mbd", "crude exports", "million b/d", 4.0, 0.5),
            ),
            "stocks by region",
            (
                ("east_mb", "east coast"),
                ("midwest_mb", "midwest"),
                ("gulf_mb", "gulf coast"),
                ("west_mb", "west coast"),
            ),
            110.0,
            ("cut", "hold", "raise"),
            "the production outlook",
            "Weekly inventories show whether crude supply is building or drawing against its usual range; "
            "refiners and traders act on every release.",
        ),
        Theme(
            "power_demand",
            "energy",
            "Power system demand",
            "grid operations analyst",
            "Synthetic Grid Reliability Council",
            "system adequacy bulletin",
            "peak_load_gw",
            "peak system load",
            "GW",
            70.0,
            5.0,
            2,
            "demand condition",
            ("low", "normal", "high", "critical"),
            (
                ("cooling_dd", "cooling degree days", "degree days", 10.0, 4.0),
                ("industrial_idx", "industrial activity index", "index", 100.0, 4.0),
                ("solar_gw", "behind-the-meter solar output", "GW", 6.0, 1.5),
            ),
            "generation by fuel",
            (("gas_gw", "gas"), ("coal_gw", "coal"), ("nuclear_gw", "nuclear"), ("renewable_gw", "renewables")),
            18.0,
            ("ease", "hold", "tighten"),
            "the reserve-margin posture",
            "The adequacy bulletin reports how close peak demand runs to capacity; operators set reserve "
            "requirements from it.",
        ),
        Theme(
            "volatility",
            "finance",
            "Equity volatility",
            "risk analyst",
            "Synthetic Markets Observatory",
            "market risk monitor",
            "vol_index",
            "implied equity volatility index",
            "points",
            18.0,
            4.0,
            2,
            "risk regime",
            ("calm", "normal", "elevated", "stressed"),
            (
                ("credit_spread_bp", "corporate credit spread", "bp", 120.0, 20.0),
                ("rate_expect_pct", "expected policy rate", "%", 4.0, 0.4),
                ("earnings_rev_idx", "earnings revisions index", "index", 0.0, 1.0),
            ),
            "market value by sector",
            (
                ("tech_bn", "technology"),
                ("financials_bn", "financials"),
                ("energy_bn", "energy"),
                ("health_bn", "health care"),
            ),
            4000.0,
            ("ease", "hold", "tighten"),
            "the risk budget",
            "The risk monitor classifies market stress from implied volatility; portfolio managers size "
            "risk budgets on each release.",
        ),
        Theme(
            "inflation",
            "finance",
            "Core inflation",
            "macroeconomic analyst",
            "Synthetic Central Bank",
            "monetary policy statement",
            "core_inflation_pct",
            "core consumer price inflation, year over year",
            "%",
            3.0,
            0.5,
            2,
            "inflation assessment",
            ("below_target", "near_target", "above_target", "well_above_target"),
            (
                ("wage_growth_pct", "wage growth", "%", 4.0, 0.5),
                ("import_prices_pct", "import price inflation", "%", 1.5, 1.5),
                ("shelter_pct", "shelter cost inflation", "%", 4.5, 0.8),
            ),
            "contributions to core inflation",
            (("goods_pp", "goods"), ("services_pp", "services"), ("shelter_pp", "shelter"), ("energy_pp", "energy")),
            0.8,
            ("cut", "hold", "hike"),
            "the policy rate",
            "The policy statement assesses inflation against target; markets reprice rate expectations on "
            "every meeting.",
        ),
        Theme(
            "ili",
            "healthcare",
            "Respiratory illness surveillance",
            "public health epidemiologist",
            "Synthetic Disease Surveillance Agency",
            "respiratory surveillance report",
            "ili_pct",
            "share of outpatient visits for influenza-like illness",
            "%",
            2.6,
            0.9,
            2,
            "activity level",
            ("minimal", "low", "moderate", "high", "very_high"),
            (
                ("flu_a_pos_pct", "influenza A test positivity", "%", 8.0, 5.0),
                ("rsv_pos_pct", "RSV test positivity", "%", 4.0, 2.5),
                ("covid_pos_pct", "SARS-CoV-2 test positivity", "%", 6.0, 3.0),
            ),
            "visits by age group",
            (
                ("age_0_4_k", "ages 0-4"),
                ("age_5_24_k", "ages 5-24"),
                ("age_25_64_k", "ages 25-64"),
                ("age_65p_k", "ages 65+"),
            ),
            25.0,
            ("stand_down", "monitor", "escalate"),
            "the response posture",
            "The surveillance report grades respiratory illness activity; hospitals and health departments "
            "staff up or stand down on each release.",
        ),
        Theme(
            "care_jobs",
            "healthcare",
            "Health care labour market",
            "health workforce analyst",
            "Synthetic Labour Statistics Bureau",
            "health care job openings digest",
            "openings_k",
            "job openings in health care and social assistance",
            "thousand",
            1500.0,
            70.0,
            1,
            "labour market tightness",
            ("slack", "balanced", "tight"),
            (
                ("quits_rate_pct", "quits rate", "%", 2.3, 0.2),
                ("hires_rate_pct", "hires rate", "%", 3.8, 0.3),
                ("wage_idx", "average hourly earnings index", "index", 100.0, 2.0),
            ),
            "openings by industry",
            (
                ("hospitals_k", "hospitals"),
                ("ambulatory_k", "ambulatory care"),
                ("nursing_k", "nursing facilities"),
                ("social_k", "social assistance"),
            ),
            380.0,
            ("slow", "steady", "expand"),
            "hiring plans",
            "The digest tracks staffing pressure in health care; providers adjust hiring plans on each release.",
        ),
        Theme(
            "diesel",
            "transportation",
            "Diesel prices",
            "freight cost analyst",
            "Synthetic Fuel Price Bureau",
            "diesel price update",
            "diesel_usd",
            "retail on-highway diesel price",
            "USD/gal",
            3.8,
            0.3,
            3,
            "price band",
            ("low", "moderate", "high", "very_high"),
            (
                ("crude_usd", "crude oil price", "USD/bbl", 78.0, 7.0),
                ("crack_usd", "diesel refining margin", "USD/bbl", 30.0, 5.0),
                ("distillate_mb", "distillate inventories", "million barrels", 120.0, 8.0),
            ),
            "sales by region",
            (
                ("east_mgal", "east coast"),
                ("midwest_mgal", "midwest"),
                ("gulf_mgal", "gulf coast"),
                ("west_mgal", "west coast"),
            ),
            250.0,
            ("lower", "hold", "raise"),
            "fuel surcharges",
            "Carriers set fuel surcharges from the weekly diesel price band; shippers budget freight costs on "
            "each release.",
        ),
        Theme(
            "freight",
            "transportation",
            "Freight activity",
            "logistics analyst",
            "Synthetic Freight Index Council",
            "freight activity index release",
            "freight_idx",
            "freight shipments index",
            "index",
            110.0,
            5.0,
            2,
            "freight cycle",
            ("contracting", "stable", "expanding"),
            (
                ("import_teu_k", "container imports", "thousand TEU", 900.0, 60.0),
                ("diesel_usd", "diesel price", "USD/gal", 3.8, 0.3),
                ("retail_idx", "retail sales index", "index", 100.0, 3.0),
            ),
            "shipments by mode",
            (("truck_mt", "truck"), ("rail_mt", "rail"), ("air_mt", "air"), ("water_mt", "water")),
            60.0,
            ("cut", "hold", "add"),
            "carrier capacity",
            "The freight index tells carriers whether demand is contracting or expanding; capacity "
            "decisions follow each release.",
        ),
    )
}

THEMES_BY_DOMAIN: dict[str, list[str]] = {}
for _theme in THEMES.values():
    THEMES_BY_DOMAIN.setdefault(_theme.domain, []).append(_theme.key)
