"""TimerBed (TimeMaster's benchmark): six real time-series classification tasks (RCW, TEE, ECG, EMG, CTU,
HAR) read from their public releases (readers.py), with the paper's class names (labels.py), prompts
(prompts.py) and plots (plots.py); scored by accuracy and macro-F1 (taskset.py)."""
