"""Generator settings as one dataclass whose defaults are the paper's grid (spec/anomalyxl.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from tsbench.core.errors import UserError
from tsbench.tasks.anomalyxl import labels as lb

PAPER_SINGLE_LENGTHS = (16384, 32768, 65536, 131072)
PAPER_MULTI_LENGTHS = (32768, 131072)
SMALL_SINGLE_LENGTHS = (1024, 2048)
SMALL_MULTI_LENGTHS = (2048,)
MULTI_CHANNEL = (lb.ALL_CHANNELS, lb.LEAD_LAG)
SPLITS = ("test", "val", "train")


@dataclass
class GenConfig:
    seed: int = 42
    categories: tuple[str, ...] = lb.PRECISE_CATEGORIES
    single_lengths: tuple[int, ...] = PAPER_SINGLE_LENGTHS
    multi_lengths: tuple[int, ...] = PAPER_MULTI_LENGTHS
    rows_per_cell: int = 50  # test split
    val_rows: int = 500  # spread evenly over the cells
    train_rows: int = 5000
    p_present: float = 0.8  # localize
    min_k: int = 0  # localize_all_channels: K ~ U{min_k..max_k}
    max_k: int = 3
    n_channels_all: int = 16
    width_range: tuple[int, int] = (8, 256)
    variance_width_floor: int = 64
    lead_lag_variance_width_floor: int = 11
    magnitude_range: tuple[float, float] = (2.0, 6.0)
    measure_magnitude_range: tuple[float, float] = (1.0, 100.0)  # log-uniform
    noise_weights: tuple[float, float, float] = (1.0, 1.0, 1.0)  # white, red, ar1
    p_periodic: float = 0.4
    p_trend: float = 0.3
    preset: str = "paper"
    extra: dict = field(default_factory=dict)

    def lengths_for(self, category: str) -> tuple[int, ...]:
        return self.multi_lengths if category in MULTI_CHANNEL else self.single_lengths

    def cells(self) -> list[tuple[str, int]]:
        """(category, L) cells in file order: category-major, then ascending L."""
        return [(c, n) for c in self.categories for n in self.lengths_for(c)]

    def rows_in_cells(self, split: str) -> dict[tuple[str, int], int]:
        cells = self.cells()
        if split == "test":
            return {cell: self.rows_per_cell for cell in cells}
        total = self.val_rows if split == "val" else self.train_rows
        base, remainder = divmod(total, len(cells))
        return {cell: base + (1 if i < remainder else 0) for i, cell in enumerate(cells)}

    def to_dict(self) -> dict:
        return asdict(self)


def preset(name: str, **overrides) -> GenConfig:
    """`paper` is the published grid; `small` is a few short rows for demos and tests."""
    if name == "paper":
        cfg = GenConfig()
    elif name == "small":
        cfg = GenConfig(
            single_lengths=SMALL_SINGLE_LENGTHS,
            multi_lengths=SMALL_MULTI_LENGTHS,
            rows_per_cell=4,
            val_rows=32,
            train_rows=128,
            preset="small",
        )
    else:
        raise UserError(f"unknown preset {name!r} (choose paper or small)")
    for key, value in overrides.items():
        if value is not None:
            setattr(cfg, key, value)
    return cfg
