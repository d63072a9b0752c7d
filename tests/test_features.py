"""The classical baseline's features on hand-built series whose answers are known in advance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tsbench.baselines import features as F


def feature_dict(x: np.ndarray) -> dict[str, float]:
    return dict(zip(F.CHANNEL_FEATURES, F.channel_features(x)))


def test_counts_match_the_paper():
    assert F.N_CHANNEL == 25
    assert F.N_QUESTION == 56
    assert len(set(F.CHANNEL_FEATURES)) == 25
    assert len(set(F.QUESTION_FEATURES)) == 56


@pytest.mark.parametrize("length, stride", [(1024, 1), (16384, 1), (16385, 2), (32768, 2), (131072, 8)])
def test_decimation_keeps_at_most_16384_points(length, stride):
    xd, s = F.decimate(np.arange(length, dtype=np.float64))
    assert s == stride
    assert len(xd) <= F.MAX_POINTS
    assert xd[1] == stride  # index i of the decimated series is raw index i * stride


def test_step_gives_the_level_shift_contrast():
    rng = np.random.default_rng(0)
    n = 8192
    step = np.concatenate([np.zeros(n // 2), np.ones(n // 2)]) + 0.01 * rng.standard_normal(n)
    f = feature_dict(step)
    # A step of height h at the midpoint: mean shift h over a std of h/2.
    assert f["level_shift"] == pytest.approx(2.0, abs=0.05)
    assert feature_dict(-step)["level_shift"] == pytest.approx(-2.0, abs=0.05)
    # PELT finds the one change, at the middle, with a jump far above the noise.
    assert f["cp_count"] >= 1
    assert f["cp_max_jump_loc"] == pytest.approx(0.5, abs=0.01)
    # White noise has no contrast.
    noise = feature_dict(rng.standard_normal(n))
    assert abs(noise["level_shift"]) < 0.1
    assert abs(noise["log_var_ratio"]) < 0.1


def test_spike_gives_max_abs_z_at_its_index():
    rng = np.random.default_rng(1)
    n = 16384
    x = rng.standard_normal(n)
    x[5000] += 25.0
    f = feature_dict(x)
    assert f["max_abs_z"] > 20
    assert f["argmax_abs_z"] == pytest.approx(5000 / n, abs=1e-9)
    assert f["first_exceed"] <= 5000 / n <= f["last_exceed"]
    assert f["peak_width6"] > 0


def test_spike_position_survives_decimation():
    rng = np.random.default_rng(2)
    n = 131072
    x = rng.standard_normal(n)
    x[80_000:80_040] += 12.0  # wide enough for every stride-8 sample to see it
    f = feature_dict(x)
    assert f["argmax_abs_z"] * n == pytest.approx(80_020, abs=40)
    assert f["log2_length"] == 17.0


def test_sine_gives_the_fft_peak():
    n = 4096
    t = np.arange(n)
    freq, share = F.dominant_frequency(np.sin(2 * np.pi * t / 64))
    assert freq == pytest.approx(1 / 64)
    assert share > 0.99
    # The same sine throughout: no change between halves. A sine only in the second half: a jump.
    steady = F.spectral_features(np.sin(2 * np.pi * t / 64) + 0.1 * np.random.default_rng(3).standard_normal(n))
    assert abs(steady["fft_power_ratio"]) < 0.2 and abs(steady["fft_freq_shift"]) < 1e-3
    late = np.where(t >= n // 2, np.sin(2 * np.pi * t / 32), 0.0) + 0.1 * np.random.default_rng(4).standard_normal(n)
    assert F.spectral_features(late)["fft_power_ratio"] > 2.0


def test_rolling_std_locates_a_variance_change():
    rng = np.random.default_rng(5)
    n = 16384
    x = rng.standard_normal(n)
    x[12000:12400] *= 6.0
    f = F.rolling_std_features(x)
    assert f["rollstd_max_z"] > 10
    assert f["rollstd_argmax"] == pytest.approx(12200 / n, abs=0.02)


def test_matrix_profile_discord_sits_on_the_odd_cycle():
    n = 4096
    t = np.arange(n)
    x = np.sin(2 * np.pi * t / 128) + 0.05 * np.random.default_rng(6).standard_normal(n)
    x[3000:3064] = 0.0  # one flattened stretch in an otherwise regular wave
    f = F.matrix_profile_features(x)
    assert f["mp_max"] > 0.5
    assert abs(f["mp_argmax"] - 3032 / n) < 0.03


def test_cross_features_find_the_lag_and_its_sign():
    rng = np.random.default_rng(7)
    n, lag = 32768, 3000
    a = rng.standard_normal(n)
    b = rng.standard_normal(n)
    a[10_000:10_100] += 6.0
    b[10_000 + lag : 10_100 + lag] += 6.0  # B repeats A's anomaly later: A leads
    best, lag_frac, zero, za, zb = F.cross_features(a, b)
    assert lag_frac * n == pytest.approx(lag, abs=20)  # a box correlates with itself over a 100-sample ridge
    assert best > zero
    assert za > 4 and zb > 4
    assert F.cross_features(b, a)[1] * n == pytest.approx(-lag, abs=20)


def test_question_features_layout():
    rng = np.random.default_rng(8)
    values = rng.standard_normal((3, 2048))
    values[1, 700] = 30.0  # channel 1 is the worst
    matrix, cross = F.row_features(values, ["ch_00", "ch_01", "ch_02"], cross=False)
    q = F.question_features(matrix, cross)
    assert q.shape == (56,)
    assert np.array_equal(q[:25], matrix[1])
    assert np.allclose(q[25:50], matrix.mean(axis=0))
    assert q[50] == 3
    assert np.all(q[51:] == 0)  # cross features are zero outside lead-lag / indicator
    assert np.all(np.isfinite(matrix))


def test_cross_features_need_two_groups():
    assert F.lead_lag_groups(["A_ch_00", "B_ch_00"]) == ([0], [1])
    assert F.lead_lag_groups(["ch_00", "ch_01"]) is None
    values = np.random.default_rng(9).standard_normal((2, 2048))
    assert np.all(F.row_cross_features(values, ["ch_00", "ch_01"]) == 0)
    assert np.any(F.row_cross_features(values, ["A_ch_00", "B_ch_00"]) != 0)


def test_features_are_deterministic_and_finite_on_awkward_input():
    for x in (
        np.zeros(1024),
        np.ones(2048),
        np.r_[np.zeros(1000), 1e6, np.zeros(1000)],
        np.linspace(-1, 1, 16384) ** 3,
    ):
        first, second = F.channel_features(x), F.channel_features(x.copy())
        assert first.shape == (25,)
        assert np.all(np.isfinite(first))
        assert np.array_equal(first, second)
        assert first[F.CHANNEL_FEATURES.index("log2_length")] == pytest.approx(math.log2(len(x)))
