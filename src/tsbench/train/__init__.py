"""Post-training on TRL: GRPO with our harness episodes as the environment (grpo.py, rollouts.py),
our rewards (rewards.py) and the task keys (curriculum.py) over the family's training stream; SFT warm starts and baselines (sft.py).
Importing this package is cheap; torch, transformers and TRL load with the trainers."""
