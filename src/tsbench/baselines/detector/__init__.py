"""`detector/default`: a training-free anomaly detector that answers every AnomalyXL category.

The model of one channel is: background (trend + periodic part + AR(1) noise) plus at most one
anomaly of a known shape family added over a window of 8..256 samples. That makes detection a
likelihood-ratio search, done in three steps.

1. Background. Fit the generator's trend family (line, log, exponential; only when it clearly
   beats a line) and the periodic part (the strongest rFFT peak in the 16..256-sample period
   band, its frequency refined off-grid, the waveform read off by folding the series at that
   period), estimate the AR(1) coefficient phi of what is left, and pre-whiten:
   y_t = r_t - phi * r_{t-1}. After pre-whitening the noise is close to white for white, AR(1)
   and random-walk scenes alike, so one Gaussian likelihood serves all three.
2. Scan. Over the whole series (slow baseline from block medians removed), score every start at
   eleven window widths with two cheap statistics, a box matched filter (in the pre-whitened
   domain) and a variance ratio, and keep the strongest few well-separated candidates, plus
   two typical background stretches.
3. Refine. Around each candidate, at full resolution, fit each of the five anomaly shapes with a
   coarse-to-fine search over start and width: box (level shift), triangle (spike),
   ramp-and-hold (trend change), extra white noise (variance) and a sine burst at the periods
   the local spectrum suggests (seasonality). Local level and slope (and near t = 0 the log
   trend) are nuisance parameters, projected out exactly. Every shape is piecewise linear, so
   its correlation with the data and with the nuisance basis is O(1) per (start, width) from
   cumulative sums.

The winning shape's log-likelihood gain, less what the same fits score on the channel's typical
background stretches, is the evidence (presence, channel flags); its window is the answer's
window; the level-shift fit's amplitude over the background std is the magnitude. Lead-lag
pairs the two channels' onsets (the generator places independent anomalies more than L/4
apart, coupled ones at most L/4). The four decision constants (`Settings`) were set once on
the train split (`calibrate`), never on test.
"""

from __future__ import annotations

from tsbench.baselines import decode
from tsbench.baselines.detector.answers import analyse, answer_object, decide  # noqa: F401
from tsbench.baselines.detector.calibrate import Analysed, _analyse_row, _mean_score, calibrate, fit_settings  # noqa: F401
from tsbench.baselines.detector.model import DEFAULT, ChannelResult, Finding, Settings  # noqa: F401
from tsbench.baselines.detector.search import analyse_channel  # noqa: F401
from tsbench.baselines.direct_policy import DirectPolicy
from tsbench.core.episode import EpisodeTask


class Detector(DirectPolicy):
    """A reference policy for the `direct` harness: it reads the full-resolution series, which no
    chat harness shows a model, and knows the generator's rules; it is ranked apart from models."""

    knows = "knows the generator"

    def __init__(self, name: str = "default", settings: Settings = DEFAULT):
        self.name = f"detector/{name}"
        self.settings = settings

    def answer(self, task: EpisodeTask) -> str:
        return decode.answer_text(answer_object(task, self.settings))


DETECTORS = {"default": Detector}


def build(name: str) -> Detector:
    if name not in DETECTORS:
        raise LookupError(name)
    return DETECTORS[name](name)
