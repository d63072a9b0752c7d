"""Scene synthesis works in place for speed; its values must stay bit-identical to the plain numpy and
scipy expressions it replaced (the regression pins depend on it), channel pool or not."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import signal

from tsbench.tasks.anomalyxl.config import preset
from tsbench.tasks.anomalyxl.generate import plan_split
from tsbench.tasks.anomalyxl.rowplan import materialize
from tsbench.tasks.anomalyxl.scene import (
    AR1_PHI,
    NOISE_KINDS,
    PERIODIC_SHAPES,
    TREND_FORMS,
    TWO_PI,
    build_scene,
    fmod_two_pi,
    plan_scene,
)


def plain_scene(scene: dict, length: int) -> np.ndarray:
    """The scene as first written: allocating expressions, scipy's square and sawtooth."""
    e = np.random.default_rng(scene["noise_seed"]).standard_normal(length)
    if scene["noise"] == "white":
        x = e
    elif scene["noise"] == "red":
        x = np.cumsum(e) / np.sqrt(length)
    else:
        c = np.sqrt(1.0 - AR1_PHI**2)
        x, _ = signal.lfilter([c], [1.0, -AR1_PHI], e, zi=[(1.0 - c) * e[0]])
    t = np.arange(length, dtype=np.float64)
    if (spec := scene["periodic"]) is not None:
        angle = 2 * np.pi * t / spec["period"] + spec["phase"]
        wave = {"sine": np.sin, "square": signal.square, "sawtooth": signal.sawtooth}[spec["shape"]](angle)
        x = x + spec["amplitude"] * wave
    if (spec := scene["trend"]) is not None:
        p = spec["param"]
        x = (
            x
            + {
                "linear": lambda: p * t,
                "exponential": lambda: np.expm1(p * t),
                "logarithmic": lambda: p * np.log1p(t),
                "constant": lambda: np.full_like(t, p),
            }[spec["form"]]()
        )
    std = x.std()
    return (x - x.mean()) / (std if std > 0 else 1.0)


def _scenes():
    rng = np.random.default_rng(11)
    for noise in NOISE_KINDS:
        for shape in (*PERIODIC_SHAPES, None):
            for form in (*TREND_FORMS, None):
                scene = plan_scene(rng, p_periodic=1.0, p_trend=1.0)
                scene["noise"] = noise
                scene["periodic"] = None if shape is None else {**scene["periodic"], "shape": shape}
                if form is None:
                    scene["trend"] = None
                else:  # a parameter of the form's own range, as plan_scene draws it
                    scene["trend"] = {"form": form, "param": 5e-4 if form in ("linear", "exponential") else 1.3}
                yield scene


@pytest.mark.parametrize("length", [1000, 4096])
def test_every_scene_kind_is_bit_identical_to_the_plain_expressions(length):
    buffers = (np.empty(length), np.empty(length), np.empty(length))
    for scene in _scenes():
        expected = plain_scene(scene, length).tobytes()
        assert build_scene(scene, length).tobytes() == expected, scene
        assert build_scene(scene, length, buffers).tobytes() == expected, scene
        as_float32 = build_scene(scene, length, buffers, out=np.empty(length, np.float32))
        assert as_float32.tobytes() == plain_scene(scene, length).astype(np.float32).tobytes(), scene


def test_the_fast_remainder_is_fmod_bit_for_bit():
    """Angles of real waves and angles a rounding hair either side of multiples of 2 pi (where the
    rounded quotient is one off), below and above the exact range of the split constant."""
    rng = np.random.default_rng(5)
    t = np.arange(2**17, dtype=np.float64)
    multiples = np.arange(1, 4000, dtype=np.float64) * TWO_PI
    cases = [
        2 * np.pi * t / rng.uniform(16.0, 256.0) + rng.uniform(0.0, 2 * np.pi),
        2 * np.pi * t / 16.0,
        np.concatenate([multiples, np.nextafter(multiples, 0), np.nextafter(multiples, np.inf)]),
        rng.uniform(0.0, 1e9, 5000),  # quotients past 2**26: fmod itself
        np.array([0.0, np.pi, TWO_PI, np.nextafter(TWO_PI, 0)]),
    ]
    rebuilt: list[int] = []
    for angles in cases:
        got = angles.copy()

        def rebuild(off, angles=angles, rebuilt=rebuilt):
            rebuilt.append(len(off))
            return angles[off]

        fmod_two_pi(got, np.empty_like(angles), rebuild)
        assert got.tobytes() == np.fmod(angles, TWO_PI).tobytes()
    assert rebuilt, "the cases reach the one-off quotients"


def test_a_negative_angle_falls_back_to_scipy():
    scene = plan_scene(np.random.default_rng(2), p_periodic=1.0, p_trend=0.0)
    for shape in ("square", "sawtooth"):
        scene["periodic"] = {**scene["periodic"], "shape": shape, "phase": -4.0}
        assert build_scene(scene, 777).tobytes() == plain_scene(scene, 777).tobytes()


def test_channels_built_on_a_pool_equal_the_serial_build():
    plans = [p for p in plan_split(preset("small"), "test") if len(p.channel_names) > 1][:3]
    with ThreadPoolExecutor(3) as pool:
        for p in plans:
            assert materialize(p.plan, pool=pool).tobytes() == materialize(p.plan).tobytes()
