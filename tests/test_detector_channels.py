"""The detector's all-channels threshold controls the row's false alarms, not each channel's: it grows
with the number of channels tested (Bonferroni), and a planted anomaly still clears it."""

from __future__ import annotations

import math

import numpy as np

from tsbench.baselines import detector
from tsbench.baselines.detector.search import presence_threshold
from tsbench.core.episode import EpisodeTask
from tsbench.tasks.anomalyxl import labels as lb
from tsbench.tasks.anomalyxl.injections import apply_injection

N = 8192


def _task(values: np.ndarray) -> EpisodeTask:
    names = [f"ch_{i:02d}" for i in range(len(values))]
    return EpisodeTask("t", lb.ALL_CHANNELS, "precise", "", names, values.astype(np.float32))


def test_threshold_grows_by_log_of_the_channels_tested():
    one = presence_threshold(N, 17.0)
    assert math.isclose(presence_threshold(N, 17.0, channels=16) - one, math.log(16))
    assert presence_threshold(N, 17.0, channels=1) == one == math.log(N) + 17.0


def test_decision_uses_the_row_channel_count():
    """The same evidence that flags a channel of a 1-channel row does not flag it among 16 channels."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, N))
    results = detector.analyse(lb.ALL_CHANNELS, list(x))
    settings = detector.Settings()
    evidence = [r.evidence(settings) for r in results]
    i = int(np.argmax(evidence))
    # an offset that puts channel i's evidence just above the uncorrected threshold
    offset = evidence[i] - math.log(N) - 0.5 * math.log(16)
    tuned = detector.Settings(channel_offset=offset)
    assert evidence[i] > presence_threshold(N, offset)  # uncorrected: a false alarm
    answer = detector.decide(lb.ALL_CHANNELS, N, [f"c{j}" for j in range(16)], [], results, tuned)
    assert answer == {"anomalies": []}
    alone = detector.decide(lb.ALL_CHANNELS, N, ["c"], [], [results[i]], tuned)
    assert len(alone["anomalies"]) == 1


def test_sixteen_noise_channels_give_no_alarm_and_a_planted_spike_is_found():
    rng = np.random.default_rng(11)
    quiet = rng.standard_normal((16, N))
    assert detector.answer_object(_task(quiet)) == {"anomalies": []}
    planted = quiet.copy()
    apply_injection(planted[5], {"kind": lb.LEVEL_SHIFT, "start": 3000, "end": 3120, "magnitude": 5.0, "sign": 1})
    found = detector.answer_object(_task(planted))["anomalies"]
    assert [a["channel"] for a in found] == ["ch_05"]
    assert abs(found[0]["start"] - 3000) < 20
