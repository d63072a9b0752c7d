"""Non-LLM baselines for AnomalyXL.

- `features`: the paper's deterministic feature extractor (25 per channel, 56 per question).
- `classical`: gradient-boosted heads over those features, one per category and regime
  (`classical/<dir>` in the model registry), and `train_classical` to fit them.
- `detector`: a training-free signal-processing detector (`detector/default`).
- `decode`: shared helpers that turn numbers into valid answers for every category.

Both models answer from the task's series and category alone; they never read the prompt text.
"""
