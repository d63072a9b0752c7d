"""Sleep-PSG as a TaskFamily (paper Table 10: 200 Hz, AIRFLOW/CHEST/ABD/SaO2, 250 windows of 60-640 s
capped at 131,072 samples, 50 per respiratory-event kind and 50 anomaly-free)."""

from __future__ import annotations

from tsbench.core.user_files import UserFolder
from tsbench.tasks.recordings.clinical import ClinicalFamily, Prompt, Source
from tsbench.tasks.recordings.sampling import WindowRules
from tsbench.tasks.sleep_psg import reader

PROMPT = Prompt(
    recording="overnight polysomnogram (respiratory channels)",
    what="respiratory event",
    kinds={
        reader.CENTRAL: "airflow stops for at least 10 s and the chest and abdominal effort stop with it",
        reader.OBSTRUCTIVE: "airflow stops for at least 10 s while chest and abdominal effort continue, "
        "often out of phase",
        reader.HYPOPNEA: "airflow drops by at least 30 % for at least 10 s, with an oxygen desaturation (SaO2 falls)",
        reader.RERA: "a respiratory-effort-related arousal: increasing effort or flattened airflow for at least 10 s "
        "that ends in an arousal, without meeting apnea or hypopnea criteria",
    },
)


class SleepPSG(ClinicalFamily):
    name = "sleep-psg"
    dataset = "Sleep-PSG generalization set (PhysioNet/CinC 2018 polysomnograms)"
    default_root_dir = "data/sleep-psg"
    rules = WindowRules(min_s=60.0, max_s=640.0, cap=reader.MAX_WINDOW, positive_in_regions=False)
    prompt = PROMPT
    short = "Sleep"
    group = "Sleep-PSG"

    def read_sources(self, folder: UserFolder) -> list[Source]:
        return reader.read_sources(folder)
