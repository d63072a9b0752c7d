"""Steps 2 and 3: scan the whole series for candidates, then fit each anomaly shape around them
at full resolution; `analyse_channel` runs one channel end to end."""

from __future__ import annotations

import math

import numpy as np

from tsbench.baselines.detector.background import (
    ar1_coefficient,
    block_median_baseline,
    jump_samples,
    periodic_part,
    robust_sigma,
    trend_part,
)
from tsbench.baselines.detector.model import (
    BASELINE_BLOCK,
    CANDIDATE_SEPARATION,
    LOG_NUISANCE_SPAN,
    MAX_WIDTH,
    MIN_WIDTH,
    N_CANDIDATES,
    NOISE_FLOOR,
    SCAN_WIDTHS,
    SEGMENT_HALF,
    ChannelResult,
    Finding,
)
from tsbench.tasks.anomalyxl import labels as lb

# ---------------------------------------------------------------------------------------------
# 2. Scan
# ---------------------------------------------------------------------------------------------


def scan_candidates(
    r: np.ndarray, phi: float, sigma: float, n_candidates: int = N_CANDIDATES
) -> tuple[list[int], list[int]]:
    """(centres of the strongest well-separated windows, centres of typical background stretches).

    Box statistic: the pre-whitened correlation with a box of width w, via u_t = y_t - phi*y_{t+1},
    whose cumulative sum gives every start at once. Variance statistic: the Gaussian likelihood
    ratio of the window's energy against unit variance. The typical stretches are the blocks whose
    best score is the median and the upper quartile of all blocks, away from the candidates:
    refined like a candidate, they tell what this channel's background scores anyway.
    """
    n = len(r)
    y = np.empty(n)
    y[0] = 0.0
    y[1:] = (r[1:] - phi * r[:-1]) / sigma
    u = y.copy()
    u[:-1] -= phi * y[1:]
    U = np.concatenate([[0.0], np.cumsum(u)])
    Q = np.concatenate([[0.0], np.cumsum(y * y)])
    best = np.zeros(n)
    for w in SCAN_WIDTHS:
        if w >= n:
            break
        corr = U[w:] - U[:-w]
        norm = 1.0 + (w - 1) * (1.0 - phi) ** 2 + phi * phi
        gain = corr * corr / (2.0 * norm)
        v = (Q[w:] - Q[:-w]) / w
        vg = np.where(v > 1.0, 0.5 * w * (v - 1.0 - np.log(np.maximum(v, 1e-12))), 0.0)
        g = np.maximum(gain, vg)
        np.maximum(best[w // 2 : w // 2 + len(g)], g, out=best[w // 2 : w // 2 + len(g)])
    out: list[int] = []
    score = best.copy()
    for _ in range(n_candidates):
        c = int(np.argmax(score))
        if not np.isfinite(score[c]) or (score[c] <= 0 and out):
            break
        out.append(c)
        score[max(0, c - CANDIDATE_SEPARATION) : c + CANDIDATE_SEPARATION] = -np.inf
    typical: list[int] = []
    blocks = n // BASELINE_BLOCK
    if blocks >= 4:
        maxima = best[: blocks * BASELINE_BLOCK].reshape(blocks, -1).max(axis=1)
        centres = np.arange(blocks) * BASELINE_BLOCK + BASELINE_BLOCK // 2
        far = np.array([all(abs(int(cb) - c) > 2 * SEGMENT_HALF for c in out) for cb in centres])
        if far.sum() >= 2:
            ranked = np.flatnonzero(far)[np.argsort(maxima[far])]
            typical = [int(centres[ranked[len(ranked) // 2]]), int(centres[ranked[(3 * len(ranked)) // 4]])]
    return out, typical


# ---------------------------------------------------------------------------------------------
# 3. Refine: exhaustive shape fits in a segment
# ---------------------------------------------------------------------------------------------


class _Cums:
    """Cumulative sums of v and t*v so that sum_{t in [a, b)} v_t (alpha + beta t) is O(1)."""

    def __init__(self, v: np.ndarray):
        t = np.arange(len(v), dtype=np.float64)
        self.p0 = np.concatenate([[0.0], np.cumsum(v)])
        self.p1 = np.concatenate([[0.0], np.cumsum(t * v)])

    def lin(self, a, b, alpha, beta):
        """sum over [a, b) of v_t (alpha + beta t); a constant alpha = 1, beta = 0 (a box) skips the
        multiplications and the t*v sums, with the same result."""
        level = self.p0[b] - self.p0[a]
        if np.isscalar(beta) and beta == 0.0:
            return level if np.isscalar(alpha) and alpha == 1.0 else alpha * level
        return alpha * level + beta * (self.p1[b] - self.p1[a])


def _triangle_norms(phi: float) -> np.ndarray:
    """||a - phi * shift(a)||^2 of the unit triangle of every width (index = width)."""
    out = np.zeros(MAX_WIDTH + 1)
    for w in range(2, MAX_WIDTH + 1):
        h = (w - 1) / 2.0
        a = 1.0 - np.abs(np.arange(w) - h) / h
        g = np.concatenate([a, [0.0]]) - phi * np.concatenate([[0.0], a])
        out[w] = float(np.dot(g, g))
    return out


def _ramp_norms(phi: float) -> np.ndarray:
    """Ramp part of ||a - phi * shift(a)||^2 for the 0..1 ramp of every width (the hold adds (1-phi)^2 per sample)."""
    out = np.zeros(MAX_WIDTH + 1)
    for w in range(2, MAX_WIDTH + 1):
        a = np.arange(w) / (w - 1.0)
        g = a - phi * np.concatenate([[0.0], a[:-1]])
        out[w] = float(np.dot(g, g))
    return out


_NORM_CACHE: dict[float, tuple[np.ndarray, np.ndarray]] = {}


def _norms(phi: float) -> tuple[np.ndarray, np.ndarray]:
    """Template norms for this phi (memoised; safe when the eval runner calls from several threads)."""
    key = round(phi, 4)
    found = _NORM_CACHE.get(key)
    if found is None:
        found = (_triangle_norms(key), _ramp_norms(key))
        if len(_NORM_CACHE) > 256:
            _NORM_CACHE.clear()
        _NORM_CACHE[key] = found
    return found


def _top_periods(y: np.ndarray, max_period: int, count: int = 3) -> list[int]:
    """Integer periods (4..max_period) of the strongest local-spectrum peaks of y, distinct by more than 1."""
    size = 1 << max(8, int(math.ceil(math.log2(max(len(y), 2)))))
    power = np.abs(np.fft.rfft(y - y.mean(), size)) ** 2
    freqs = np.arange(len(power)) / size
    ok = (freqs >= 1.0 / max_period) & (freqs <= 0.25)
    if not ok.any():
        return []
    idx = np.flatnonzero(ok)
    periods: list[int] = []
    for i in idx[np.argsort(power[idx])[::-1]]:
        p = min(max(int(round(1.0 / freqs[i])), 4), max_period)
        if all(abs(p - q) > 1 for q in periods):
            periods.append(p)
        if len(periods) == count:
            break
    return periods


COARSE_WIDTHS = np.unique(np.round(np.geomspace(MIN_WIDTH, MAX_WIDTH, 24)).astype(np.int64))
FINE_START_RADIUS = 24  # the fine pass tries starts (or ends) within this many samples of the coarse one


class _Segment:
    """One stretch of the series, ready for exact shape fits at any (start, width).

    In segment coordinates t = 0..n-1 the pre-whitened data are y_t = r_t - phi r_{t-1} (t >= 1)
    with the nuisance trend projected out. For an x-domain template a the pre-whitened template
    is g_t = a_t - phi a_{t-1}; its correlation with y, and its products with the nuisance basis,
    are sums of a against fixed sequences (u and one c per basis vector), and since every
    template is piecewise linear each such sum is O(1) from two cumulative sums.
    """

    def __init__(self, seg: np.ndarray, phi: float, sigma: float, offset: int = 0):
        n = len(seg)
        self.n, self.phi, self.sigma = n, phi, sigma
        self.tri_norm, self.ramp_norm = _norms(phi)
        t = np.arange(n, dtype=np.float64)
        self.t = t
        y = np.zeros(n)
        y[1:] = (seg[1:] - phi * seg[:-1]) / sigma
        # Nuisance columns (level, slope and, near the series start, the log trend whose steep
        # beginning no line follows), pre-whitened like the data and orthonormalised on t = 1..n-1.
        columns = [np.ones(n), t]
        if offset < LOG_NUISANCE_SPAN:
            columns.append(np.log1p(offset + t))
        nuisance = np.stack(columns, axis=1)
        filtered = nuisance[1:] - phi * nuisance[:-1]
        # A random walk (phi = 1) turns the constant into zeros: drop such columns before QR, or
        # Householder would fill the gap with an arbitrary direction and orthogonalise against it.
        norms = np.linalg.norm(filtered, axis=0)
        filtered = filtered[:, norms > 1e-9 * norms.max()]
        q, r = np.linalg.qr(filtered)
        keep = np.abs(np.diag(r)) > 1e-8 * (np.abs(np.diag(r)).max() or 1.0)
        basis = q[:, keep]  # (n - 1, k)
        yy = y[1:]
        self.yp = yp = np.concatenate([[0.0], yy - basis @ (basis.T @ yy)])
        later = np.concatenate([yp[1:], [0.0]])
        self.U = _Cums(yp - phi * later)
        # For each basis vector e, the sequence c with sum_t a_t c_t = <g, e> (g the pre-whitened template).
        self.C = []
        for e in basis.T:
            full = np.concatenate([[0.0], e])  # e indexed by t, e[0] unused
            self.C.append(_Cums(full - phi * np.concatenate([full[1:], [0.0]])))
        self.Q = np.concatenate([[0.0], np.cumsum(yp * yp)])
        self._coarse = None  # the coarse (widths x every start) grid, shared by all shapes

    def grid(self, widths: np.ndarray, starts: np.ndarray):
        """(W, S, E, valid) broadcast arrays; a window must leave one sample after it in the segment.

        `starts` is one row of starts shared by every width, or a (widths x k) array of its own.
        """
        W = np.asarray(widths, dtype=np.int64)[:, None]
        S = np.asarray(starts, dtype=np.int64)
        S = S[None, :] if S.ndim == 1 else S
        valid = (S >= 1) & (S + W <= self.n - 1)
        Sv = np.where(valid, S, 1)
        Ev = np.minimum(np.where(valid, S + W, 1 + W), self.n)
        return W, Sv, Ev, valid

    def _fit(self, parts, norm2, valid):
        corr = sum(self.U.lin(a, b, al, be) for a, b, al, be in parts)
        perp = norm2
        for c in self.C:
            g = sum(c.lin(a, b, al, be) for a, b, al, be in parts)
            perp = perp - g * g
        perp = np.maximum(perp, 1e-9)
        gain = np.where(valid, corr * corr / (2.0 * perp), -np.inf)
        return gain, corr / perp * self.sigma

    def evaluate(self, kind: str, widths, starts, *, period: int = 0, min_width: int = MIN_WIDTH, grid=None):
        """(gain, amplitude) arrays over widths x starts for one anomaly shape."""
        W, S, E, valid = grid if grid is not None else self.grid(widths, starts)
        valid = valid & (W >= min_width)
        Wf = W.astype(np.float64)
        phi, n = self.phi, self.n
        if kind == lb.LEVEL_SHIFT:  # a box of ones on [s, e)
            norm = 1.0 + (Wf - 1.0) * (1.0 - phi) ** 2 + phi * phi
            return self._fit([(S, E, 1.0, 0.0)], norm, valid)
        if kind == lb.TRANSIENT_SPIKE:  # 0 at both edges, 1 at the centre
            h = (Wf - 1.0) / 2.0
            mid = S + np.floor(h).astype(np.int64) + 1
            return self._fit(
                [(S, mid, -S / h, 1.0 / h), (mid, E, (S + Wf - 1.0) / h, -1.0 / h)], self.tri_norm[W], valid
            )
        if kind == lb.TREND:  # ramp 0..1 over [s, e), then 1 to the end of the segment
            norm = self.ramp_norm[W] + (1.0 - phi) ** 2 * (n - E)
            parts = [(S, E, -S / (Wf - 1.0), 1.0 / (Wf - 1.0)), (E, np.full_like(E, n), 1.0, 0.0)]
            return self._fit(parts, norm, valid)
        if kind == lb.VARIANCE:  # extra white noise: energy of the window against unit variance
            v = (self.Q[E] - self.Q[S]) / Wf
            gain = np.where(valid & (v > 1.0), 0.5 * Wf * (v - 1.0 - np.log(np.maximum(v, 1e-12))), -np.inf)
            return gain, self.sigma * np.sqrt(np.maximum(v - 1.0, 0.0) / (1.0 + phi * phi))
        if kind == lb.SEASONALITY:  # a sine burst of period p: two-parameter (sin, cos) fit
            Z = self._demodulated(period)
            z = Z[E] - Z[S]
            gain = np.where(valid & (W >= 2 * period), (np.abs(z) ** 2) / Wf, -np.inf)
            response = max(abs(1 - phi * np.exp(-2j * np.pi / period)), 1e-3)
            return gain, 2.0 * np.abs(z) / Wf * self.sigma / response
        raise ValueError(kind)

    def _demodulated(self, period: int) -> np.ndarray:
        cache = self.__dict__.setdefault("_demod", {})
        if period not in cache:
            cache[period] = np.concatenate([[0.0], np.cumsum(self.yp * np.exp(-2j * np.pi * self.t / period))])
        return cache[period]

    def best(self, kind: str, *, periods: tuple[int, ...] = (0,), min_width: int = MIN_WIDTH) -> Finding | None:
        """Coarse grid of widths at every start, then every width and start near the coarse best.

        For the sine burst, `periods` are tried on the coarse grid and the fine pass also tries
        the neighbours (period +- 1) of the coarse winner.
        """
        starts = np.arange(1, self.n)
        if self._coarse is None:
            self._coarse = self.grid(COARSE_WIDTHS, starts)
        best_gain, coarse = -np.inf, None
        for p in periods:
            gain, _ = self.evaluate(kind, COARSE_WIDTHS, starts, period=p, min_width=min_width, grid=self._coarse)
            i = int(np.argmax(gain))
            if gain.flat[i] > best_gain:
                best_gain, coarse = (
                    float(gain.flat[i]),
                    (p, int(COARSE_WIDTHS[i // gain.shape[1]]), int(starts[i % gain.shape[1]])),
                )
        if coarse is None or not np.isfinite(best_gain):
            return None
        p0, w0, s0 = coarse
        # Fine pass: every width, with the window's start or its end near either edge of the
        # coarse window. On a random walk (phi = 1) a box's evidence sits in its two edges alone,
        # so a coarse window may have found just one of them, as its start or as its end.
        widths = np.arange(MIN_WIDTH, MAX_WIDTH + 1)
        near = np.arange(-FINE_START_RADIUS, FINE_START_RADIUS + 1)
        grids = []
        for edge in (s0, s0 + w0):
            grids.append((edge + near)[None, :].repeat(len(widths), axis=0))  # a window starting there
            grids.append((edge + near)[None, :] - widths[:, None])  # a window ending there
        found = None
        for starts in grids:
            fine_grid = self.grid(widths, starts)
            for p in (p0 - 1, p0, p0 + 1) if p0 else (0,):
                if p0 and p < 4:
                    continue
                gain, amp = self.evaluate(kind, widths, starts, period=p, min_width=min_width, grid=fine_grid)
                j = int(np.argmax(gain))
                if np.isfinite(gain.flat[j]) and (found is None or gain.flat[j] > found.gain):
                    wi, si = divmod(j, gain.shape[1])
                    w, st = int(widths[wi]), int(fine_grid[1][wi, si])
                    found = Finding(kind, st, st + w, float(gain.flat[j]), float(amp.flat[j]), p)
        return found


def refine(
    r: np.ndarray,
    lo: int,
    hi: int,
    phi: float,
    sigma: float,
    *,
    variance_min_width: int = 64,
) -> dict[str, Finding]:
    """The best window of each kind in r[lo:hi] (periodic part already removed), in series indices.

    Gains are raw log-likelihood ratios; kind penalties are applied when deciding (`Settings`).
    """
    if hi - lo < 2 * MIN_WIDTH + 4:
        return {}
    segment = _Segment(r[lo:hi].astype(np.float64), phi, sigma, offset=lo)
    results: dict[str, Finding] = {}
    for kind in (lb.LEVEL_SHIFT, lb.TRANSIENT_SPIKE, lb.TREND):
        f = segment.best(kind)
        if f is not None:
            results[kind] = f
    f = segment.best(lb.VARIANCE, min_width=variance_min_width)
    if f is not None:
        results[lb.VARIANCE] = f
    n = segment.n
    centre = segment.yp[max(1, n // 2 - MAX_WIDTH) : min(n, n // 2 + MAX_WIDTH)]
    periods = tuple(_top_periods(centre, MAX_WIDTH // 2))
    if periods:
        f = segment.best(lb.SEASONALITY, periods=periods)
        if f is not None:
            results[lb.SEASONALITY] = f
    return {kind: f.shifted(lo) for kind, f in results.items()}


# ---------------------------------------------------------------------------------------------
# One channel, end to end
# ---------------------------------------------------------------------------------------------


def analyse_channel(x: np.ndarray, *, variance_min_width: int = 64, n_candidates: int = N_CANDIDATES) -> ChannelResult:
    """Background model, scan, refinement: the channel's best anomaly and the best of each kind."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    x1 = x - trend_part(x)
    periodic, f0 = periodic_part(x1)
    r2 = x1 - periodic if periodic is not None else x1
    if periodic is not None:
        unreliable = jump_samples(x1, periodic, f0)
        if unreliable.any() and not unreliable.all():
            idx = np.arange(n)
            r2 = r2.copy()
            r2[unreliable] = np.interp(idx[unreliable], idx[~unreliable], r2[~unreliable])
    r = r2 - block_median_baseline(r2)
    phi = ar1_coefficient(r2)
    y = r[1:] - phi * r[:-1]
    # Float32 storage can leave a channel dominated by a steep trend with no visible noise at all;
    # the floor keeps the likelihood from treating rounding as the noise level.
    sigma = max(robust_sigma(y), NOISE_FLOOR * (float(np.std(x)) or 1.0))
    candidates, typical = scan_candidates(r, phi, sigma, n_candidates)
    by_kind: dict[str, Finding] = {}
    null_by_kind: dict[str, float] = {}
    for centre in candidates + typical:
        lo = max(0, centre - SEGMENT_HALF)
        hi = min(n, centre + SEGMENT_HALF)
        found = refine(r2, lo, hi, phi, sigma, variance_min_width=variance_min_width)
        if centre in typical:
            for kind, f in found.items():
                null_by_kind[kind] = max(null_by_kind.get(kind, 0.0), f.gain)
            continue
        for kind, f in found.items():
            if kind not in by_kind or by_kind[kind].gain < f.gain:
                by_kind[kind] = f
    # The background std without the anomaly: the generator measures magnitudes against it.
    mask = np.ones(n, dtype=bool)
    shift = by_kind.get(lb.LEVEL_SHIFT)
    if shift is not None:
        mask[shift.start : shift.end] = False
    sigma_x = float(np.std(x[mask])) if mask.sum() > 1 else float(np.std(x))
    return ChannelResult(by_kind, sigma_x or 1.0, n, phi, periodic is not None, null_by_kind)


def presence_threshold(length: int, offset: float, channels: int = 1) -> float:
    """Evidence needed to call an anomaly: grows like log L, the null maximum over L positions, and,
    where `channels` channels are each tested, like log C more (Bonferroni: a log-likelihood gain's
    null tail falls like exp(-gain), so testing C channels at level p each is testing at C p), so the
    row's false-alarm rate, not each channel's, is what the offset sets."""
    return math.log(max(length, 2)) + math.log(max(channels, 1)) + offset
