"""TimerBed's six tasks as the paper names them: the class names a model answers with (TimeMaster's
public reward code matches these ignoring case: core/class_tags.py), the class codes of each public
release and the names they stand for, the channels, and the reasoning type (TimeMaster Table 1, 4).

A class code is what the release stores: UCR/UEA class values ("1", "2" in Computers; "0".."6" in
Lightning7; "RightWhale"/"NoWhale" in RightWhaleCalls), the PhysioNet/CinC 2017 REFERENCE.csv codes
(N, A, O, ~), the EMG record names, the UCI HAR activity ids (1..6) and names (WALKING, ...).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskSpec:
    code: str  # lower-case task name, the category of its rows
    short: str  # the paper's column label
    group: str  # the paper's reasoning type (the board's header)
    classes: tuple[str, ...]  # the answers, in the order the release numbers them
    codes: dict[str, str]  # release class code -> class name
    channels: tuple[str, ...]  # channel names (HAR's legend is the paper's)
    length: int  # the paper's series length (Table 4)


def _codes(classes: tuple[str, ...], *extra: dict[str, str]) -> dict[str, str]:
    found = {c.lower(): c for c in classes}
    for more in extra:
        found.update({k.lower(): v for k, v in more.items()})
    return found


RCW_CLASSES = ("RightWhale", "NoWhale")
TEE_CLASSES = (
    "CG Positive",
    "IR Negative",
    "Subsequent Return Stroke",
    "Impulsive",
    "Impulsive Pair",
    "Gradual Intra-Cloud",
    "Off-record",
)
ECG_CLASSES = ("normal sinus rhythm", "atrial fibrillation", "other cardiac rhythms", "noise")
EMG_CLASSES = ("Healthy", "Myopathy", "Neuropathy")
CTU_CLASSES = ("Desktop", "Laptop")
HAR_CLASSES = ("walking", "walking_upstairs", "walking_downstairs", "sitting", "standing", "laying")

TASKS: dict[str, TaskSpec] = {
    spec.code: spec
    for spec in (
        TaskSpec(
            "rcw",
            "RCW",
            "Simple Deterministic",
            RCW_CLASSES,
            # UEA RightWhaleCalls stores the names; the Kaggle release it comes from, 1 = call present.
            _codes(RCW_CLASSES, {"1": "RightWhale", "0": "NoWhale"}),
            ("audio",),
            4000,
        ),
        TaskSpec(
            "tee",
            "TEE",
            "Simple Deterministic",
            TEE_CLASSES,
            # UCR Lightning7: class 0..6 in the archive's order (CG, IR, SR, I, I2, KM, O).
            _codes(TEE_CLASSES, {str(i): name for i, name in enumerate(TEE_CLASSES)}),
            ("power_density",),
            319,
        ),
        TaskSpec(
            "ecg",
            "ECG",
            "Complex Deterministic",
            ECG_CLASSES,
            _codes(ECG_CLASSES, dict(zip(("N", "A", "O", "~"), ECG_CLASSES))),
            ("ECG",),
            1500,
        ),
        TaskSpec(
            "emg",
            "EMG",
            "Complex Deterministic",
            EMG_CLASSES,
            _codes(
                EMG_CLASSES,
                {"emg_healthy": "Healthy", "emg_myopathy": "Myopathy", "emg_neuropathy": "Neuropathy"},
                {str(i): name for i, name in enumerate(EMG_CLASSES)},
            ),
            ("EMG",),
            1500,
        ),
        TaskSpec(
            "ctu",
            "CTU",
            "Probabilistic",
            CTU_CLASSES,
            _codes(CTU_CLASSES, {"1": "Desktop", "2": "Laptop"}),  # UCR Computers
            ("electricity",),
            720,
        ),
        TaskSpec(
            "har",
            "HAR",
            "Probabilistic",
            HAR_CLASSES,
            _codes(HAR_CLASSES, {str(i + 1): name for i, name in enumerate(HAR_CLASSES)}),  # activity_labels.txt
            ("body_acc_x", "body_acc_y", "body_acc_z"),
            128,
        ),
    )
}

# The public releases' names for each task, as the archives and databases spell them.
RELEASE_NAMES = {
    "rcw": ("RightWhaleCalls", "RCW"),
    "tee": ("Lightning7", "TEE"),
    "ctu": ("Computers", "CTU"),
    "ecg": ("ECG",),
    "emg": ("EMG",),
    "har": ("HAR",),
}


def task_of(name: str) -> TaskSpec | None:
    """The TimerBed task a release name (file stem or folder) stands for, or None."""
    lowered = name.lower()
    for code, names in RELEASE_NAMES.items():
        if lowered in {n.lower() for n in names}:
            return TASKS[code]
    return None


def class_name(spec: TaskSpec | None, raw: str, renames: dict[str, str]) -> str:
    """A release's class code as the paper's class name (a labels.json rename wins)."""
    if raw in renames:
        return renames[raw]
    if spec is None:
        return raw
    return spec.codes.get(str(raw).strip().lower(), str(raw))
