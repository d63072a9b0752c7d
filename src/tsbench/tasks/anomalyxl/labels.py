"""Exact strings of AnomalyXL: category ids, kind labels and MCQ option texts.

Kept free of numpy so scorers and leaderboards can share them without pulling in the generator.
"""

LEVEL_SHIFT = "Level Shift"
TRANSIENT_SPIKE = "Transient Spike"
SEASONALITY = "Change in Seasonality"
VARIANCE = "Change in Variance"
TREND = "Change in Trend"
KINDS = (LEVEL_SHIFT, TRANSIENT_SPIKE, SEASONALITY, VARIANCE, TREND)
NO_ANOMALY_KIND = "No anomaly"  # precise classify-with-evidence label for "none"

LOCALIZE = "localize"
CLASSIFY = "classify_with_evidence"
MAGNITUDE = "measure_magnitude"
ALL_CHANNELS = "localize_all_channels"
LEAD_LAG = "lead_lag_with_magnitude"
PRECISE_CATEGORIES = (LOCALIZE, CLASSIFY, MAGNITUDE, ALL_CHANNELS, LEAD_LAG)

PRESENCE = "presence"
START_TIME = "start_time"
CATEGORIZATION = "categorization"
MAGNITUDE_BAND = "magnitude_band"
IDENTIFICATION = "identification"
INDICATOR = "indicator"
MCQ_CATEGORIES = (PRESENCE, START_TIME, CATEGORIZATION, MAGNITUDE_BAND, IDENTIFICATION, INDICATOR)

ALL_CATEGORIES = PRECISE_CATEGORIES + MCQ_CATEGORIES

# MCQ option texts, exactly as the spec fixes them.
YES, NO = "Yes", "No"
START_BINS = ("Before", "Early", "Medium", "Late")  # onset in quartile 1..4 of [0, L)
NO_ANOMALY_OPTION = "No Anomaly"  # start_time, categorization, magnitude_band
MAGNITUDE_BANDS = ("1-3σ", "3-10σ", "10-30σ", "30-100σ")
MAGNITUDE_BAND_EDGES = (1.0, 3.0, 10.0, 30.0, 100.0)
IDENTIFICATION_NONE = "None"
INDICATOR_OPTIONS = ("Leading", "Lagging", "Correlated", "Uncorrelated", "No anomaly")
DIRECTIONS = ("lead", "lag", "independent")
DIRECTION_TO_INDICATOR = {"lead": "Leading", "lag": "Lagging", "independent": "Uncorrelated"}

# Every option a template can offer, for rows whose gold does not list its own (identification's
# options are channel names, different on every row: None).
MCQ_OPTIONS = {
    PRESENCE: (YES, NO),
    START_TIME: (*START_BINS, NO_ANOMALY_OPTION),
    CATEGORIZATION: (*KINDS, NO_ANOMALY_OPTION),
    MAGNITUDE_BAND: (*MAGNITUDE_BANDS, NO_ANOMALY_OPTION),
    IDENTIFICATION: None,
    INDICATOR: INDICATOR_OPTIONS,
}


def regime_of(category: str) -> str:
    """'precise' for the five Localize tasks, 'coarse' for the six MCQ templates."""
    if category in PRECISE_CATEGORIES:
        return "precise"
    if category in MCQ_CATEGORIES:
        return "coarse"
    raise ValueError(f"unknown category {category!r}")


def start_bin(start: int, length: int) -> str:
    return START_BINS[min(3, start * 4 // length)]


def magnitude_band(m: float) -> str:
    for i, band in enumerate(MAGNITUDE_BANDS):
        if m < MAGNITUDE_BAND_EDGES[i + 1]:
            return band
    return MAGNITUDE_BANDS[-1]
