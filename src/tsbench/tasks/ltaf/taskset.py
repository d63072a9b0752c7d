"""LTAF ECG as a TaskFamily (paper Table 10: 128 Hz, 2 channels, 250 windows of 60-1017 s, 200 with
one premature beat split evenly between PVC and APC, 50 anomaly-free)."""

from __future__ import annotations

from tsbench.core.user_files import UserFolder
from tsbench.tasks.ltaf import reader
from tsbench.tasks.recordings.clinical import ClinicalFamily, Prompt, Source
from tsbench.tasks.recordings.sampling import WindowRules

PROMPT = Prompt(
    recording="ECG recording",
    what="premature beat",
    kinds={
        reader.PVC: "an early, wide and abnormally shaped QRS complex with no preceding P wave, "
        "usually followed by a compensatory pause",
        reader.APC: "an early beat with a premature, often differently shaped P wave and a normal narrow QRS "
        "complex, usually followed by a non-compensatory pause",
    },
)


class LTAF(ClinicalFamily):
    name = "ltaf"
    dataset = "LTAF ECG generalization set (LTAFDB)"
    default_root_dir = "data/ltaf"
    rules = WindowRules(min_s=60.0, max_s=1017.0, cap=reader.MAX_WINDOW)
    prompt = PROMPT
    short = "LTAF"
    group = "LTAF (ECG)"

    def read_sources(self, folder: UserFolder) -> list[Source]:
        return reader.read_sources(folder)
