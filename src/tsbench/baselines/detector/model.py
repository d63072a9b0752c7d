"""The detector's constants, settings and findings: what every stage shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from tsbench.tasks.anomalyxl import labels as lb

MIN_WIDTH, MAX_WIDTH = 8, 256  # anomaly widths the generator draws (samples)
PERIOD_BAND = (16.0, 256.0)  # background periodic parts have periods in this range
SCAN_WIDTHS = (8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)
BASELINE_BLOCK = 512  # block-median baseline for the scan (anomalies are at most half a block)
SEGMENT_HALF = 768  # refinement looks this far either side of a candidate's centre
N_CANDIDATES = 3
CANDIDATE_SEPARATION = 512
FOLD_WINDOW_MIN, FOLD_WINDOW_MAX, FOLD_WINDOW_DIVISOR = 33, 257, 512  # running-mean window over sorted phases
JUMP_SHARE, JUMP_ZONE = 0.5, 0.01  # a template step over half its range is a jump; cycles either side
TREND_RATE = 1.2e-3  # exponential trends have rates within +-1e-3 per sample
TREND_GAIN = 0.05  # curved trend terms are used only when they leave < 5 % of a line's misfit
LOG_NUISANCE_SPAN = 8192  # segments starting this close to t = 0 also project out log1p(t)
RANDOM_WALK_PHI = 0.95  # AR(1) estimates above this are random walks: phi = 1
NOISE_FLOOR = 1e-3  # the pre-whitened noise std is never taken below this share of the channel std
PERIODIC_RATIO = 40.0  # peak / local-median periodogram power that counts as a periodic part


@dataclass(frozen=True)
class Settings:
    """The detector's few decision constants, set once on the train split by `calibrate` (never on
    test). Gains are log-likelihood ratios; thresholds grow like log L (`presence_threshold`).

    The defaults are `fit_settings` on the seed-42 train split's first 800 rows (50 per cell):
    only the channel offset moved off its starting value (4 -> 17); the grid optimum of the
    others was the starting value itself. Issue 26 made the channel threshold grow with the number
    of channels tested (log C more, `presence_threshold`); refitted the same way on 44 seed-42 train
    all-channels rows (30 at L = 32768, 14 at 131072), the optimum is a plateau from 7 to 14.5, and
    the value nearest the old one, 14.5, was kept (for 16 channels: 14.5 + log 16 = 17.3).
    """

    presence_offset: float = 4.0  # single-channel presence: gain > log L + offset
    channel_offset: float = 14.5  # all-channels / identification: gain > log L + log C + offset, per channel
    seasonality_penalty: float = 4.0  # the sine burst's extra parameters (second amplitude, period)
    variance_penalty: float = 0.0

    def penalty(self, kind: str) -> float:
        if kind == lb.SEASONALITY:
            return self.seasonality_penalty
        if kind == lb.VARIANCE:
            return self.variance_penalty
        return 0.0


DEFAULT = Settings()


@dataclass
class Finding:
    """One fitted anomaly: its shape, window, evidence and size."""

    kind: str
    start: int
    end: int
    gain: float  # log-likelihood ratio against "background only" (kind penalty applied by ChannelResult.ranked)
    # signed, in the channel's units (box/triangle/ramp), or the extra std (variance/seasonality)
    amplitude: float = 0.0
    period: int = 0  # seasonality only

    def shifted(self, offset: int) -> Finding:
        return Finding(self.kind, self.start + offset, self.end + offset, self.gain, self.amplitude, self.period)


@dataclass
class ChannelResult:
    """The best fit of each kind in a channel (raw gains), and the channel's background std."""

    by_kind: dict[str, Finding]
    sigma_x: float
    length: int
    phi: float = 0.0
    periodic: bool = False
    null_by_kind: dict[str, float] = field(default_factory=dict)  # best gains on typical background

    def null_gain(self, settings: Settings = DEFAULT) -> float:
        """What the channel's own background scores: the best penalised fit on typical stretches."""
        values = [g - settings.penalty(k) for k, g in self.null_by_kind.items()]
        return max(values + [0.0])

    def evidence(self, settings: Settings = DEFAULT) -> float:
        """How far the best fit stands above what this channel's background scores anyway.

        An anomaly happens once; a background the model fits badly (the jumps of a square wave
        over a quiet random walk, a steep trend's curvature) scores high on every stretch.
        """
        return self.best(settings).gain - self.null_gain(settings)

    def ranked(self, settings: Settings = DEFAULT) -> list[Finding]:
        """Findings with kind penalties applied, strongest first (ties: the kinds' fixed order)."""
        order = {k: i for i, k in enumerate(lb.KINDS)}
        found = [
            Finding(f.kind, f.start, f.end, f.gain - settings.penalty(f.kind), f.amplitude, f.period)
            for f in self.by_kind.values()
        ]
        return sorted(found, key=lambda f: (-f.gain, order[f.kind]))

    def best(self, settings: Settings = DEFAULT) -> Finding:
        ranked = self.ranked(settings)
        return ranked[0] if ranked else Finding(lb.LEVEL_SHIFT, 0, min(self.length, MIN_WIDTH), 0.0)

    def magnitude(self) -> float:
        """The level-shift size in units of the series' std without the shift."""
        f = self.by_kind.get(lb.LEVEL_SHIFT)
        if f is None:
            return 1.0
        return abs(f.amplitude) / self.sigma_x if self.sigma_x > 0 else abs(f.amplitude)
