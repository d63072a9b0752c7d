"""Post-training on TRL: GRPO with our harness episodes as the environment (grpo.py, rollouts.py),
our rewards (rewards.py) and the task keys (curriculum.py) over the family's training stream; SFT warm starts and baselines (sft.py).
Importing this package is cheap; torch, transformers and TRL load with the trainers.

OpenMP's idle threads spin by default; on CPU cores that other work shares, torch's forwards and
backwards then stall at every barrier. Measured on 2 cores at load 8-11 (a SmolLM2-135M LoRA row of 560
tokens, forward and backward with checkpointing): 56 s with torch's 2 threads spinning, 11 s waiting
passively, 12 s on one thread. Passive waiting costs nothing when the cores are free, and libgomp reads
it once as torch loads, so it is set here, before any trainer imports torch (a user's own value stays).
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
