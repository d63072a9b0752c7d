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
from tsbench.testing import readiness

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Test-only probe appended to a copy of the page: records whether each image decoded.
PROBE = (
    "<script>window.addEventListener('load', () => { for (const img of document.images) "
    "img.setAttribute('data-decoded', img.complete && img.naturalWidth > 0 ? img.naturalWidth : 0); });</script>"
)


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
    return readiness.run([browser, *FLAGS, f"--user-data-dir={profile}", *args], text=True)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    rows = [record(f"L{i}-{L}", "localize", (i % 4) / 4, length=L) for i in range(8) for L in (1024, 4096)]
    rows += [
        record(f"P{i}", "presence", float(i % 3 != 0), gold="Yes", pred="Yes" if i % 3 else "No") for i in range(9)
    ]
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


# Test-only probe: where the Localize headers and the page's right edge are, at the window's size.
GEOMETRY_PROBE = (
    "<script>window.addEventListener('load', () => { const out = {width: document.documentElement.scrollWidth, "
    "view: window.innerWidth, heads: []}; for (const th of document.querySelectorAll('table.t1 th.g-localize')) { "
    "const r = th.getBoundingClientRect(); out.heads.push([r.left, r.top, r.right, r.bottom]); } "
    "document.body.setAttribute('data-geometry', JSON.stringify(out)); });</script>"
)
LOCALIZE_HEADER_RGB = (0xDC, 0xEB, 0xD9)  # th.g-localize's background in html.STYLE


def probe(browser: str, page: Path, tmp_path: Path, size: list[str], script: str, attribute: str) -> dict:
    """A copy of the page with a test-only probe script, loaded at `size`: what it wrote into `attribute`."""
    import json
    import re

    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", script + "</body>"))
    done = chromium(browser, tmp_path / "profile", *size, "--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(re.search(rf"{attribute}=\"([^\"]*)\"", done.stdout).group(1).replace("&quot;", '"'))


@pytest.fixture(scope="module", params=[6, 1], ids=["n12", "n2"])
def full_page(request, tmp_path_factory) -> Path:
    """Every AnomalyXL column, paper-like model names, a reference policy and a partial run; with
    12 rows per cell, and with 2 (a --limit 2 run: every interval flagged n < 10, the widest cells)."""
    from test_leaderboard import PRECISE
    from tsbench.tasks.anomalyxl import labels as lb

    per_length = request.param
    root = tmp_path_factory.mktemp("full")
    rows = [
        record(f"{c}-{L}-{i}", c, (i % 5) / 4, length=L)
        for c in PRECISE
        for i in range(per_length)
        for L in (16384, 131072)
    ]
    rows += [
        record(f"{c}-{i}", c, float(i % 2), gold="Yes", pred="Yes" if i % 2 else "No")
        for c in lb.MCQ_CATEGORIES
        for i in range(2 * per_length)
    ]
    names = ["openai/gpt-5.5", "vllm/Qwen/Qwen3.5-4B-Instruct", "local/checkpoints/grpo-qwen3.5-4b-step-800"]
    for i, model in enumerate(names):
        make_run(
            root,
            f"r{i}",
            model,
            [{**r, "score": (r["score"] + i / 7) % 1} for r in rows],
            harness=("rlm-image", "single-pass-text", "rlm")[i],
            depth=i % 2,
            complete=i != 2,
        )
    make_run(root, "det", "detector/default", rows, harness="direct", reference="knows the generator")
    result = build_leaderboard(sorted(root.iterdir()), root / "out", with_paper=True, n_boot=100)
    return result.files["leaderboard.html"]


def test_localize_columns_are_visible_at_1400_px(full_page, tmp_path):
    """The page fits a 1400 px window: the Localize headers lie inside it, and a screenshot shows
    their colour where the layout says they are (so they are drawn, not clipped or scrolled away)."""
    browser = find_browser()
    size = ["--window-size=1400,1600", "--force-device-scale-factor=1", "--hide-scrollbars"]
    geometry = probe(browser, full_page, tmp_path, size, GEOMETRY_PROBE, "data-geometry")
    assert geometry["view"] == 1400 and geometry["width"] <= 1400, geometry
    heads = geometry["heads"]
    assert len(heads) == 1 + 5  # the group header and the five Localize columns
    assert all(0 <= left and right <= 1400 for left, _, right, _ in heads), heads

    shot = tmp_path / "shot.png"
    done = chromium(browser, tmp_path / "profile2", *size, f"--screenshot={shot}", full_page.as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    pixels = (imread(shot)[..., :3] * 255).round().astype(int)
    assert pixels.shape[1] == 1400
    for left, top, _right, bottom in heads:
        y, x = int((top + bottom) / 2), int(left + 3)  # inside the cell, clear of its text
        assert np.abs(pixels[y, x] - LOCALIZE_HEADER_RGB).max() <= 3, (x, y, pixels[y, x])


# Test-only probe: at the window's width, does the page overflow, and does every table fit or scroll in its box?
NARROW_PROBE = (
    "<script>window.addEventListener('load', () => { const out = {width: document.documentElement.scrollWidth, "
    "view: window.innerWidth, tables: []}; for (const t of document.querySelectorAll('table')) { "
    "const box = t.parentElement; const style = getComputedStyle(box); out.tables.push({cls: t.className, "
    "right: t.getBoundingClientRect().right, box_right: box.getBoundingClientRect().right, "
    "scrolls: style.overflowX === 'auto' && box.scrollWidth > box.clientWidth}); } "
    "document.body.setAttribute('data-narrow', JSON.stringify(out)); });</script>"
)


def test_at_800_px_every_table_fits_or_scrolls_in_its_box_and_the_page_never_overflows(full_page, tmp_path):
    """A reviewer's half-screen window: Table 1, the Cost table and the others either fit or scroll
    inside their own box (nothing cut at the window's edge), and a screenshot is the window's width."""
    browser = find_browser()
    size = ["--window-size=800,1600", "--force-device-scale-factor=1", "--hide-scrollbars"]
    narrow = probe(browser, full_page, tmp_path, size, NARROW_PROBE, "data-narrow")
    assert narrow["view"] == 800 and narrow["width"] <= 800, narrow  # the page itself never scrolls sideways
    classes = [t["cls"] for t in narrow["tables"]]
    assert {"t1", "costs", "quoted"} <= set(classes), classes
    for table in narrow["tables"]:
        assert table["box_right"] <= 800 and (table["right"] <= 800 or table["scrolls"]), table
    assert any(t["scrolls"] for t in narrow["tables"] if t["cls"] == "t1")  # 17 columns scroll at 800 px

    shot = tmp_path / "shot.png"
    done = chromium(browser, tmp_path / "profile2", *size, f"--screenshot={shot}", full_page.as_uri())
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    pixels = imread(shot)
    assert pixels.shape[1] == 800 and float(np.std(pixels[..., :3])) > 0.05
