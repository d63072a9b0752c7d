"""TRL's GRPOTrainer with the episodes' images in its loss forward, through TRL's own image support.

TRL (1.16) feeds images to the policy's forward from the dataset's "images" column: it puts them in the
conversational "prompt" (`prepare_multimodal_messages`), re-renders that with the processor, and passes
pixel_values, image_grid_thw, mm_token_type_ids, ... to every log-probability it computes (old, reference,
policy). With a `rollout_func`, though, the images exist only once the episode has drawn its task and
rendered its plot. So this trainer plays the step's episodes first, then hands TRL the same rows with
"prompt" = the episode's first conversation and "images" = the images the policy saw; TRL's
`rollout_func` returns the episodes already played. The token ids are the rollout's own; the processor
expands each image to the same number of image tokens, so TRL's pixels line up with them.
"""

from __future__ import annotations

from typing import Any


def vision_trainer_class() -> type:
    from trl import GRPOTrainer

    class VisionGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose rows carry the images the rollouts showed (see the module docstring)."""

        def __init__(self, *args: Any, environment: Any, **kwargs: Any):
            self.environment = environment
            self._played: dict[str, list] | None = None
            self._keys: list[str] = []
            super().__init__(*args, rollout_func=replay_played, **kwargs)

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            self._keys = [row["prompt"] for row in inputs]
            output = self.environment(self._keys, self)
            visions = output.pop("vision", None) or [None] * len(inputs)
            if any(v is not None and v.images for v in visions):
                if not all(v is not None and v.images for v in visions):
                    raise RuntimeError("a step mixes episodes with and without images; TRL batches one kind")
                inputs = [
                    {**row, "prompt": vision.conversation, "images": vision.images}
                    for row, vision in zip(inputs, visions)
                ]
            self._played = output
            return super()._generate_and_score_completions(inputs)

        def _calculate_rewards(self, inputs: list, prompts: list, *args: Any) -> Any:
            # the reward functions group rollouts by task key (rewards.groups_of), not by conversation
            return super()._calculate_rewards(inputs, self._keys, *args)

    return VisionGRPOTrainer


def replay_played(prompts: list, trainer: Any) -> dict[str, list]:
    """TRL's rollout_func for VisionGRPOTrainer: the episodes this step already played."""
    played, trainer._played = trainer._played, None
    if played is None:
        raise RuntimeError("VisionGRPOTrainer's rollout ran outside its step")
    return played
