"""TSRBench: multimodal temporal reasoning, 15 multiple-choice subtasks in 4 dimensions."""
