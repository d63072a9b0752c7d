"""Loaders for the real series that installed packages ship offline, each as a table with a
`date` column (the issuer-style period label) and numeric columns, oldest row first.

Shipped and used: statsmodels elnino, co2, macrodata, nile, sunspots, danish_data,
interest_inflation; aeon Airline, Lynx, Uschange, ShampooSales (CSV files inside the aeon wheel).
Shipped and not used, with the reason (a release series needs a calendar, enough history for the
rules and more than one state): statsmodels copper (25 rows) and longley (16 rows) are too short;
fertility and grunfeld are panels across countries and firms; strikes, china_smoking, anes96,
cancer, ccard, committee, cpunish, engel, fair, heart, modechoice, randhie, scotland, spector,
stackloss, star98 and statecrime are cross-sections; aeon PBS_dataset holds 0/1 placeholders,
solar is one week of half-hourly output (mostly night zeros, no release periods), and its
classification, segmentation and anomaly sets are not release series. scipy.datasets and sklearn's
fetchers download at run time, so they are not offline.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def _aeon_csv(name: str) -> pd.DataFrame:
    import aeon

    return pd.read_csv(Path(aeon.__file__).parent / "datasets" / "data" / name / f"{name}.csv")


def elnino() -> pd.DataFrame:
    import statsmodels.api as sm

    wide = sm.datasets.elnino.load_pandas().data
    months = [c for c in wide.columns if c != "YEAR"]
    rows = [
        (f"{int(year):04d}-{m + 1:02d}", float(row[c]))
        for year, row in zip(wide["YEAR"], wide.to_dict("records"))
        for m, c in enumerate(months)
    ]
    return pd.DataFrame(rows, columns=["date", "sst_c"])


def co2() -> pd.DataFrame:
    import statsmodels.api as sm

    data = sm.datasets.co2.load_pandas().data.dropna()
    return pd.DataFrame({"date": [d.date().isoformat() for d in data.index], "co2_ppm": data["co2"].to_numpy()})


def macro() -> pd.DataFrame:
    import statsmodels.api as sm

    data = sm.datasets.macrodata.load_pandas().data
    out = pd.DataFrame({"date": [f"{int(y)}-Q{int(q)}" for y, q in zip(data["year"], data["quarter"])]})
    for col in ("realgdp", "realcons", "realinv", "realgovt", "unemp", "infl"):
        out[col] = data[col].to_numpy()
    return out


def nile() -> pd.DataFrame:
    import statsmodels.api as sm

    data = sm.datasets.nile.load_pandas().data
    return pd.DataFrame({"date": [str(int(y)) for y in data["year"]], "volume_1e8m3": data["volume"].to_numpy()})


def sunspots() -> pd.DataFrame:
    import statsmodels.api as sm

    data = sm.datasets.sunspots.load_pandas().data
    return pd.DataFrame({"date": [str(int(y)) for y in data["YEAR"]], "sunspots": data["SUNACTIVITY"].to_numpy()})


def danish() -> pd.DataFrame:
    """Danish money demand, quarterly 1974-1987 (logs of real money, income, prices; bond and deposit rates)."""
    import statsmodels.api as sm

    data = sm.datasets.danish_data.load_pandas().data
    out = pd.DataFrame({"date": [f"{d.year}-Q{(d.month - 1) // 3 + 1}" for d in data.index]})
    for col in ("lrm", "lry", "lpy", "ibo", "ide"):
        out[col] = data[col].to_numpy()
    return out


def interest_inflation() -> pd.DataFrame:
    """German interest rate and inflation change, quarterly 1972-1998; rates in percent."""
    import statsmodels.api as sm

    data = sm.datasets.interest_inflation.load_pandas().data
    return pd.DataFrame(
        {
            "date": [f"{int(y)}-Q{int(q)}" for y, q in zip(data["year"], data["quarter"])],
            "rate_pct": 100 * data["R"].to_numpy(),
            "dp_pct": 100 * data["Dp"].to_numpy(),
        }
    )


def airline() -> pd.DataFrame:
    """Monthly airline passengers 1949-1960 (thousands) and their growth on a year earlier (%);
    the growth column drops the first twelve months, which have no year-earlier reading."""
    data = _aeon_csv("Airline")
    x = data["Passengers"].astype(float)
    out = pd.DataFrame({"date": data["Date"].astype(str), "passengers_k": x, "growth_pct": 100 * (x / x.shift(12) - 1)})
    return out.iloc[12:].reset_index(drop=True)


def lynx() -> pd.DataFrame:
    """Annual Canadian lynx trappings 1821-1934 (Hudson's Bay Company records)."""
    data = _aeon_csv("Lynx")
    return pd.DataFrame(
        {"date": data.iloc[:, 0].astype(int).astype(str), "lynx_trapped": data.iloc[:, 1].astype(float)}
    )


def uschange() -> pd.DataFrame:
    """US quarterly percentage changes 1970-2016: consumption, income, production, savings, unemployment."""
    data = _aeon_csv("Uschange")
    out = pd.DataFrame({"date": [q.replace(" Q", "-Q") for q in data["Quarter"].astype(str)]})
    for col in ("Consumption", "Income", "Production", "Savings", "Unemployment"):
        out[col.lower()] = data[col].astype(float).to_numpy()
    return out


def shampoo() -> pd.DataFrame:
    """Monthly shampoo sales over three years (the Makridakis series)."""
    data = _aeon_csv("ShampooSales")
    return pd.DataFrame({"date": data["Time"].astype(str), "sales": data["Sales"].astype(float)})
