"""leaderboard.html opened in a real headless Chromium: the tables are in the DOM and the inlined
figures decode. Skips (saying why) where no browser can be had; under CI a missing browser fails."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from test_leaderboard import make_run, record
from tsbench.leaderboard import build_leaderboard

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Test-only probe appended to a copy of the page: records whether each image decoded.
PROBE = ("<script>window.addEventListener('load', () => { for (const img of document.images) "
         "img.setAttribute('data-decoded', img.complete && img.naturalWidth > 0 ? img.naturalWidth : 0); });</script>")


def find_browser() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    reason = "no chromium or chromium-browser on PATH (scripts/ensure_chromium.sh installs Debian's chromium as root)"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must provide a browser for this test")
    pytest.skip(reason)


def chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    rows = [record(f"L{i}-{L}", "localize", (i % 4) / 4, length=L) for i in range(8) for L in (1024, 4096)]
    rows += [record(f"P{i}", "presence", float(i % 3 != 0), gold="Yes", pred="Yes" if i % 3 else "No")
             for i in range(9)]
    make_run(root, "one", "model-one", rows)
    make_run(root, "two", "model-two", [{**r, "score": 1 - r["score"]} for r in rows])
    result = build_leaderboard([root / "one", root / "two"], root / "out", with_paper=True, n_boot=100)
    return result.files["leaderboard.html"]


def test_tables_and_figures_render_in_chromium(page, tmp_path):
    browser = find_browser()
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    done = chromium(browser, tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    assert dom.count('<tr class="config">') == 2 and "model-one" in dom and "model-two" in dom
    assert '<table class="quoted">' in dom and "GPT-5.5 (depth-1)" in dom
    images = dom.count("<img ")
    assert images == 2 and dom.count('data-decoded="0"') == 0 and dom.count("data-decoded=") == images


def test_screenshot_is_not_blank(page, tmp_path):
    browser = find_browser()
    shot = tmp_path / "shot.png"
    done = chromium(browser, tmp_path / "profile", "--window-size=1400,1800", f"--screenshot={shot}", page.as_uri())
    assert done.returncode == 0 and shot.stat().st_size > 0, done.stderr[-2000:]
    pixels = imread(shot)
    assert pixels.shape[0] > 100 and float(np.std(pixels[..., :3])) > 0.05  # something was drawn
