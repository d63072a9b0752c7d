"""The 20-feature series fingerprint psi of TimeClaw (paper Appendix B.2, Table 4), in pure numpy.

psi = [logLen, logChan, miss, irreg, meanZ (reserved, 0), stdLog, IQR/sigma, skew, kurt, slope, R^2,
       rho(1), rho(sqrt n), rho(n/4), fftFreq, fftPFrac, specEnt, cp, |rho| (multivariate), out]

Two readings, chosen by `variant`:

* "timeclaw" (default): as the authors' `compute_fingerprint` (timeclaw/memory/fingerprint.py) computes
  it, which built the banks behind the published tables; tests/golden/timeclaw/ holds its outputs on
  1,000 series. Where it differs from the paper's equations: miss counts the entries each channel has
  (a padded array must say its channels' `lengths`, or padding counts as missing); an input with no
  finite value is all zeros; a channel is constant when its std is below 1e-12; IQR/(sigma + 1e-12);
  R^2 = 1 - SS_res / SS_tot (0 when SS_tot <= 1e-12); lags floor(sqrt n) and n // 4 are at least 1, and
  rho(n/4) takes rho(sqrt n)'s value when n // 4 is 1 (n = 4..7 read rho(2) there); the spectral
  fractions use sum + 1e-12 and p clipped to [1e-12, 1]; cp counts every change of np.sign of the
  CUSUM, zeros and round-off included; |rho| keeps channels with std > 1e-12; irreg reads string
  timestamps as numpy datetime64[ns]; the result is rounded to float32 (the authors' dtype).
* "paper": the equations of Appendix B.2 read literally: miss over N x T (T the longest channel), a
  CUSUM value within 1e-9 of zero carries no sign, a lag outside 1..n-1 gives 0, an input with
  entries but no finite value has miss = 1; a channel is constant when its values are all equal or
  its std is below 1e-12 * (1 + |mean|); float64.

Both drop non-finite values per channel (n_i finite values) and channels with n_i = 0 (N' remain);
per-channel features are 0 when n_i < 3 or the channel is constant, spectral ones when n_i < 8, and
averaged over the N' channels (degenerate ones count, with 0). Both are invariant under permutations
of the channels.
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
_PER_CHANNEL = FEATURE_NAMES[6:18] + FEATURE_NAMES[19:]  # averaged over channels; not |rho|, a pairwise one


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


def _moments(x: np.ndarray) -> tuple[dict[str, float], float, float] | None:
    """(every per-channel feature and sigma at 0, mean, sample std), or None below 3 values."""
    if len(x) < 3:
        return None
    return dict.fromkeys((*_PER_CHANNEL, "sigma"), 0.0), float(x.mean()), float(x.std(ddof=1))


def channel_features(x: np.ndarray) -> dict[str, float]:
    """The per-channel features of one channel's finite values (sigma_i included), degenerate rules applied."""
    n = len(x)
    if (start := _moments(x)) is None:
        return dict.fromkeys((*_PER_CHANNEL, "sigma"), 0.0)
    out, mu, sigma = start
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


def _paper(raw: list[np.ndarray], timestamps) -> np.ndarray:
    total_entries = len(raw) * max((len(x) for x in raw), default=0)
    finite = [x[np.isfinite(x)] for x in raw]
    kept = [x for x in finite if len(x) > 0]
    psi = np.zeros(DIM, dtype=np.float64)
    if total_entries:
        psi[2] = 1.0 - sum(len(x) for x in finite) / total_entries
    psi[3] = _irregular(timestamps)
    if not kept:
        return psi
    _shape_and_channels(psi, kept, [channel_features(x) for x in kept])
    psi[18] = mean_abs_correlation(kept)
    return psi


def _shape_and_channels(psi: np.ndarray, kept: list[np.ndarray], per_channel: list[dict[str, float]]) -> None:
    """logLen, logChan, stdLog and the per-channel features averaged over the N' kept channels (both readings)."""
    psi[0] = np.log10(float(np.median([len(x) for x in kept])) + 1.0)
    psi[1] = np.log2(len(kept) + 1.0)
    psi[5] = np.log10(float(np.mean([f["sigma"] for f in per_channel])) + 1.0)
    for index, name in enumerate(FEATURE_NAMES):
        if name in _PER_CHANNEL:
            psi[index] = float(np.mean([f[name] for f in per_channel]))


# -- the authors' reading ("timeclaw") ---------------------------------------------------------------


def _tc_acf(c: np.ndarray, lag: int, denominator: float) -> float:
    if lag <= 0 or lag >= len(c):
        return 0.0
    return float((c[:-lag] * c[lag:]).sum() / denominator)


def tc_channel_features(x: np.ndarray) -> dict[str, float]:
    """The per-channel features of one channel's finite values as the authors' code computes them."""
    n = len(x)
    if (start := _moments(x)) is None:
        return dict.fromkeys((*_PER_CHANNEL, "sigma"), 0.0)
    out, mu, sigma = start
    if sigma < EPS:
        return out
    out["sigma"] = sigma
    out["iqr_over_std"] = (float(np.quantile(x, 0.75)) - float(np.quantile(x, 0.25))) / (sigma + EPS)
    z = (x - mu) / sigma
    out["skew"] = float((z**3).mean())
    out["kurt"] = float((z**4).mean()) - 3.0
    u = np.linspace(0.0, 1.0, n)
    a, b = np.polyfit(u, x, 1)
    ss_res = float(((x - (a * u + b)) ** 2).sum())
    ss_tot = float(((x - mu) ** 2).sum())
    out["r2"] = 1.0 - ss_res / ss_tot if ss_tot > EPS else 0.0
    out["slope"] = float(a) / (sigma + EPS)
    c = x - mu
    denominator = float((c * c).sum()) + EPS
    root, quarter = max(1, int(np.floor(np.sqrt(n)))), max(1, n // 4)
    out["acf_1"] = _tc_acf(c, 1, denominator)
    out["acf_sqrt"] = out["acf_1"] if root == 1 else _tc_acf(c, root, denominator)
    out["acf_quarter"] = out["acf_sqrt"] if quarter in (1, root) else _tc_acf(c, quarter, denominator)
    if n >= 8:
        power = np.abs(np.fft.rfft(c)) ** 2
        non_dc = power[1:]
        total = float(non_dc.sum()) + EPS
        k_star = int(np.argmax(non_dc)) + 1
        out["fft_freq"] = float(np.fft.rfftfreq(n, d=1.0)[k_star])
        out["fft_pfrac"] = float(power[k_star] / total)
        p = np.clip(non_dc / total, EPS, 1.0)
        out["spec_entropy"] = float(-(p * np.log2(p)).sum()) / max(1.0, float(np.log2(p.size)))
    steps = np.diff(x)
    signs = np.sign(np.cumsum(steps - steps.mean()))
    out["cp_rate"] = float(int((np.diff(signs) != 0).sum())) / float(n)
    median = float(np.median(x))
    mad = float(np.median(np.abs(x - median))) + EPS
    out["outlier_rate"] = float((np.abs(x - median) > 3.0 * mad).mean())
    return out


def tc_mean_abs_correlation(channels: list[np.ndarray]) -> float:
    """Feature 19 as the authors' code: channels cut to the shortest, those with std > 1e-12 kept."""
    if len(channels) < 2 or min(len(x) for x in channels) < 3:
        return 0.0
    n_min = min(len(x) for x in channels)
    block = np.vstack([x[:n_min] for x in channels])
    block = block[block.std(axis=1, ddof=1) > EPS]
    if len(block) < 2:
        return 0.0
    upper = np.corrcoef(block)[np.triu_indices(len(block), k=1)]
    upper = upper[np.isfinite(upper)]
    return float(np.abs(upper).mean()) if upper.size else 0.0


def tc_irregular(timestamps) -> float:
    """1 when there are at least 3 timestamps and the CV of their steps exceeds 0.01. Strings (and
    datetimes) are read as numpy datetime64[ns] as the authors' code reads them (an unreadable one
    gives 0); numbers are taken as they are (seconds)."""
    if timestamps is None or len(timestamps) < 3:
        return 0.0
    values = np.asarray(timestamps)
    if values.dtype.kind in "iuf":
        steps = np.diff(values.astype(np.float64))
    else:
        try:
            stamps = np.asarray(timestamps, dtype="datetime64[ns]")
        except (TypeError, ValueError):
            return 0.0
        steps = np.diff(stamps).astype("int64").astype(float)
    mean = steps.mean()
    if not mean > 0:
        return 0.0
    return 1.0 if steps.std() / mean > 0.01 else 0.0


def _timeclaw(raw: list[np.ndarray], timestamps) -> np.ndarray:
    finite = [x[np.isfinite(x)] for x in raw]
    kept = [x for x in finite if len(x) > 0]
    psi = np.zeros(DIM, dtype=np.float64)
    if not kept:
        return psi
    psi[2] = 1.0 - sum(len(x) for x in kept) / sum(len(x) for x in raw)
    psi[3] = tc_irregular(timestamps)
    _shape_and_channels(psi, kept, [tc_channel_features(x) for x in kept])
    psi[18] = tc_mean_abs_correlation(kept)
    single = psi.astype(np.float32)  # the authors' dtype, then their guard against non-finite values
    return np.where(np.isfinite(single), single, 0.0).astype(np.float64)


VARIANTS = {"timeclaw": _timeclaw, "paper": _paper}
DEFAULT_VARIANT = "timeclaw"


def fingerprint(values, timestamps=None, *, lengths=None, variant: str = DEFAULT_VARIANT) -> np.ndarray:
    """psi in R^20 of a series: `values` as (channels, T), a list of 1-D arrays or a dict of them.

    `lengths`: how many entries each channel really has when `values` pads shorter channels (the
    rest is padding, not missing data). `variant`: "timeclaw" (the authors' code) or "paper"."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown fingerprint variant {variant!r} (one of {', '.join(VARIANTS)})")
    raw = _channels(values)
    if lengths is not None:
        if len(lengths) != len(raw):
            raise ValueError(f"{len(lengths)} channel lengths for {len(raw)} channels")
        raw = [x[: int(n)] for x, n in zip(raw, lengths)]
    return VARIANTS[variant](raw, timestamps)


def padded_lengths(values) -> list[int] | None:
    """Each channel's length in a NaN-padded (channels, T) array (the index after its last finite
    value), or None when no channel is shorter than another (nothing to strip). A channel that is
    missing throughout, or whose own data end in NaN beside a longer channel, reads as padded: rows
    that know better carry meta `channel_lengths`."""
    block = np.asarray(values, dtype=np.float64)
    if block.ndim != 2 or not block.size:
        return None
    finite = np.isfinite(block)
    ends = np.where(finite.any(axis=1), block.shape[1] - np.argmax(finite[:, ::-1], axis=1), 0)
    return None if len(set(ends.tolist())) <= 1 else [int(e) for e in ends]


def series_lengths(values, meta: dict | None) -> list[int] | None:
    """The channel lengths a row's fingerprint uses: its meta `channel_lengths` when it has them,
    else those `padded_lengths` reads off the NaN padding."""
    given = (meta or {}).get("channel_lengths")
    return [int(n) for n in given] if given is not None else padded_lengths(values)


def fingerprint_dict(values, timestamps=None, *, lengths=None, variant: str = DEFAULT_VARIANT) -> dict[str, float]:
    return dict(zip(FEATURE_NAMES, fingerprint(values, timestamps, lengths=lengths, variant=variant).tolist()))
