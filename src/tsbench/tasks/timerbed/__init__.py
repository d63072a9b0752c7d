"""TimerBed (TimeMaster's benchmark): six real time-series classification tasks, read from
UCR/UEA-format .ts files with aeon; scored by accuracy and macro-F1."""
