"""A toy two-class plot task (rising vs falling): the CPU smoke and learning test of TimeMaster's
vision-language GRPO run on it with no downloaded data."""
