"""The 20-feature series fingerprint psi of TimeClaw (paper Appendix B.2, Table 4), in pure numpy.

psi = [logLen, logChan, miss, irreg, meanZ (reserved, 0), stdLog, IQR/sigma, skew, kurt, slope, R^2,
       rho(1), rho(sqrt n), rho(n/4), fftFreq, fftPFrac, specEnt, cp, |rho| (multivariate), out]

Conventions, as the paper fixes them:
* non-finite entries are dropped per channel (n_i finite values); channels with n_i = 0 are
  dropped, N' channels remain; epsilon = 1e-12 in the marked denominators;
* a per-channel feature is 0 when n_i < 3 or the channel is constant (sigma_i = 0); the spectral
  features are 0 when n_i < 8; per-channel features are averaged over the N' channels (degenerate
  channels count, with 0); stdLog = log10(mean sigma_i + 1);
* the multivariate feature is the mean |Pearson r| over pairs of non-constant channels truncated
  to the shortest length; 0 when fewer than 2 such channels or that length < 3;
* slot 5 is reserved and always 0; irreg is 1 only when timestamps are given and unevenly spaced.

Where the paper leaves a detail open, this module decides (and says so): a channel counts as
constant when its values are all equal or its std is below 1e-12 * (1 + |mean|) (so float
round-off on a constant does not make it "non-constant"); an autocorrelation lag outside
1..n_i-1 (lag floor(n_i/4) = 0 for n_i = 3) gives 0; CUSUM values within 1e-9 of zero (relative
to the CUSUM's scale) carry no sign and are skipped when counting sign changes (the CUSUM ends at
exactly zero in exact arithmetic); miss uses T = the longest channel; all-empty input gives 0s
(with miss = 1 when the input had entries).

Invariant under permutations of the channels: every aggregate is symmetric in the channel index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

EPS = 1e-12
FEATURE_NAMES = (
    "logLen",
    "logChan",
    "miss",
    "irreg",
    "meanZ",
    "stdLog",
    "iqr_over_std",
    "skew",
    "kurt",
    "slope",
    "r2",
    "acf_1",
    "acf_sqrt",
    "acf_quarter",
    "fft_freq",
    "fft_pfrac",
    "spec_entropy",
    "cp_rate",
    "mean_abs_corr",
    "outlier_rate",
)
DIM = len(FEATURE_NAMES)  # 20
_PER_CHANNEL = (
    "iqr_over_std",
    "skew",
    "kurt",
    "slope",
    "r2",
    "acf_1",
    "acf_sqrt",
    "acf_quarter",
    "fft_freq",
    "fft_pfrac",
    "spec_entropy",
    "cp_rate",
    "outlier_rate",
)


def _channels(values) -> list[np.ndarray]:
    if isinstance(values, Mapping):
        values = list(values.values())
    if isinstance(values, np.ndarray):
        if values.ndim == 1:
            return [values.astype(np.float64)]
        if values.ndim != 2:
            raise ValueError(f"values must be (channels, T), got shape {values.shape}")
        return [row.astype(np.float64) for row in values]
    if isinstance(values, Sequence):
        return [np.asarray(v, dtype=np.float64).ravel() for v in values]
    raise TypeError("values must be an array (channels, T), a list of 1-D arrays or a dict of them")


def _is_constant(x: np.ndarray, sigma: float) -> bool:
    return bool(np.all(x == x[0])) or sigma < 1e-12 * (1.0 + abs(float(np.mean(x))))


def acf_at(c: np.ndarray, lag: int, denominator: float) -> float:
    """rho(lag) of a centred series c (eq. 42); 0 outside 1..n-1."""
    n = len(c)
    if lag < 1 or lag > n - 1:
        return 0.0
    return float(np.dot(c[: n - lag], c[lag:]) / denominator)


def cusum_sign_changes(x: np.ndarray) -> int:
    """Z_i of eq. 49-50: sign changes of the centred CUSUM of the first differences."""
    d = np.diff(x)
    if len(d) == 0:
        return 0
    s = np.cumsum(d - d.mean())
    tol = 1e-9 * (float(np.max(np.abs(s))) + EPS)
    signs = np.sign(s[np.abs(s) > tol])
    return int(np.count_nonzero(signs[1:] != signs[:-1]))


def channel_features(x: np.ndarray) -> dict[str, float]:
    """The per-channel features of one channel's finite values (sigma_i included), degenerate rules applied."""
    n = len(x)
    out = dict.fromkeys(_PER_CHANNEL, 0.0)
    out["sigma"] = 0.0
    if n < 3:
        return out
    mu = float(np.mean(x))
    sigma = float(np.std(x, ddof=1))
    if _is_constant(x, sigma):
        return out
    out["sigma"] = sigma
    q25, q75 = np.quantile(x, [0.25, 0.75])
    out["iqr_over_std"] = float(q75 - q25) / sigma
    z = (x - mu) / sigma
    out["skew"] = float(np.mean(z**3))
    out["kurt"] = float(np.mean(z**4) - 3.0)
    median = float(np.median(x))
    mad = float(np.median(np.abs(x - median))) + EPS
    out["outlier_rate"] = float(np.count_nonzero(np.abs(x - median) > 3.0 * mad)) / n
    u = np.arange(n, dtype=np.float64) / (n - 1)
    a, b = np.polyfit(u, x, 1)
    out["slope"] = float(a) / (sigma + EPS)
    c = x - mu
    ss_tot = float(np.dot(c, c))
    residual = x - (a * u + b)
    out["r2"] = 1.0 - float(np.dot(residual, residual)) / (ss_tot + EPS)
    denominator = ss_tot + EPS
    out["acf_1"] = acf_at(c, 1, denominator)
    out["acf_sqrt"] = acf_at(c, int(np.floor(np.sqrt(n))), denominator)
    out["acf_quarter"] = acf_at(c, n // 4, denominator)
    if n >= 8:
        power = np.abs(np.fft.rfft(c)) ** 2
        non_dc = power[1:]
        total = float(non_dc.sum())
        k_star = int(np.argmax(non_dc)) + 1
        out["fft_freq"] = k_star / n
        out["fft_pfrac"] = float(power[k_star]) / (total + EPS)
        if total > 0:
            p = non_dc / total
            p = p[p > 0]
            bins = n // 2
            out["spec_entropy"] = float(-(p * np.log2(p)).sum() / np.log2(bins)) if bins > 1 else 0.0
    out["cp_rate"] = cusum_sign_changes(x) / n
    return out


def mean_abs_correlation(channels: list[np.ndarray]) -> float:
    """Feature 19: mean |Pearson r| over distinct pairs of non-constant channels cut to the shortest length."""
    if len(channels) < 2:
        return 0.0
    n_min = min(len(x) for x in channels)
    if n_min < 3:
        return 0.0
    cut = [x[:n_min] for x in channels]
    kept = [x for x in cut if not _is_constant(x, float(np.std(x, ddof=1)))]
    if len(kept) < 2:
        return 0.0
    r = np.corrcoef(np.stack(kept))
    upper = np.triu_indices(len(kept), k=1)
    return float(np.mean(np.abs(r[upper])))


def _irregular(timestamps) -> float:
    if timestamps is None:
        return 0.0
    t = np.asarray(timestamps, dtype=np.float64).ravel()
    t = t[np.isfinite(t)]
    if len(t) < 3:
        return 0.0
    dt = np.diff(t)
    mean = float(np.mean(dt))
    if mean == 0:
        return 0.0
    return 1.0 if float(np.std(dt)) / abs(mean) > 0.01 else 0.0


def fingerprint(values, timestamps=None) -> np.ndarray:
    """psi in R^20 of a series: `values` as (channels, T), a list of 1-D arrays or a dict of them."""
    raw = _channels(values)
    total_entries = len(raw) * max((len(x) for x in raw), default=0)
    finite = [x[np.isfinite(x)] for x in raw]
    kept = [x for x in finite if len(x) > 0]
    psi = np.zeros(DIM, dtype=np.float64)
    if total_entries:
        psi[2] = 1.0 - sum(len(x) for x in finite) / total_entries
    psi[3] = _irregular(timestamps)
    if not kept:
        return psi
    psi[0] = np.log10(float(np.median([len(x) for x in kept])) + 1.0)
    psi[1] = np.log2(len(kept) + 1.0)
    per_channel = [channel_features(x) for x in kept]
    psi[5] = np.log10(float(np.mean([f["sigma"] for f in per_channel])) + 1.0)
    mean_of = {key: float(np.mean([f[key] for f in per_channel])) for key in _PER_CHANNEL}
    for index, name in enumerate(FEATURE_NAMES):
        if name in mean_of:
            psi[index] = mean_of[name]
    psi[18] = mean_abs_correlation(kept)
    return psi


def fingerprint_dict(values, timestamps=None) -> dict[str, float]:
    return dict(zip(FEATURE_NAMES, fingerprint(values, timestamps).tolist()))
