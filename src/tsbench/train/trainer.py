"""TRL's GRPOTrainer for tsbench's episodes: every forward at its rows' own length, the episodes' images
in the loss, and the step logged per episode.

* Trimmed forwards. TRL pads the whole local batch to its longest prompt (left) and completion
  (right) and then runs every forward (the old and reference log-probabilities in chunks of
  per_device_train_batch_size, the loss on each micro-batch) at that full width, so a short turn's
  row, or a masked row that pads an episode out to max_turns rows (reasoning_history as-rendered),
  costs a forward and backward as wide as the longest row. `_get_per_token_logps_and_entropies` is
  the one place all of those forwards pass: each chunk is cut to the columns some row of it attends
  to, run, and its log-probabilities padded back to TRL's width (zeros where every row is masked, so
  the loss reads the same numbers). `tokens` counts the cells run against the tokens in the rows and
  against what the full width would have run; the step's log carries them (tokens/*).
* A vision-language policy. TRL (1.16) feeds images to the policy's forward from the dataset's
  "images" column: it puts them in the conversational "prompt" (`prepare_multimodal_messages`),
  re-renders that with the processor and passes pixel_values, image_grid_thw, mm_token_type_ids, ...
  to every log-probability it computes. With a `rollout_func`, though, the images exist only once the
  episode has drawn its task and rendered its plot. So the step's episodes are played first, then TRL
  gets the same rows with "prompt" = the episode's first conversation and "images" = the images the
  policy saw; TRL's `rollout_func` returns the episodes already played. The token ids are the
  rollout's own; the processor expands each image to the same number of image tokens.
* Logging per episode. TRL's completions/* numbers are per training row; with one row per turn they
  count turns (and the masked filler rows), so the step's log takes the environment's per-episode
  numbers (episode/*) in their place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

VISION_KEYS = (
    "pixel_values",
    "image_grid_thw",
    "pixel_attention_mask",
    "spatial_shapes",
    "image_sizes",
    "image_position_ids",
)
PER_TOKEN_KEYS = ("token_type_ids", "mm_token_type_ids")


@dataclass
class TokenCounts:
    """One step's forwards: cells run (rows x width after trimming), cells at TRL's full width, and the
    tokens the rows hold (attended positions)."""

    run: int = 0
    full_width: int = 0
    in_rows: int = 0

    def add(self, rows: int, width: int, full: int, tokens: int) -> None:
        self.run += rows * width
        self.full_width += rows * full
        self.in_rows += tokens

    def metrics(self) -> dict[str, float]:
        if not self.in_rows:
            return {}
        return {
            "tokens/processed": float(self.run),
            "tokens/in_rows": float(self.in_rows),
            "tokens/full_width": float(self.full_width),
            "tokens/processed_per_row_token": self.run / self.in_rows,
            "tokens/full_width_per_row_token": self.full_width / self.in_rows,
        }


def attended_span(attention_mask: Any) -> tuple[int, int]:
    """[first, last] columns some row attends to (a pure function of the mask, for tests)."""
    import torch

    used = torch.nonzero(attention_mask.any(dim=0)).flatten()
    if used.numel() == 0:
        return 0, attention_mask.size(1) - 1
    return int(used[0]), int(used[-1])


def episode_trainer_class() -> type:
    import torch
    from trl import GRPOTrainer

    class EpisodeTrainer(GRPOTrainer):
        """GRPOTrainer whose rollouts are tsbench episodes (see the module docstring)."""

        def __init__(self, *args: Any, environment: Any, **kwargs: Any):
            self.environment = environment
            self.tokens = TokenCounts()
            self._played: dict[str, list] | None = None
            self._keys: list[str] = []
            super().__init__(*args, rollout_func=self._rollout, **kwargs)

        # -- rollouts ------------------------------------------------------------------------
        def _rollout(self, prompts: list, trainer: Any) -> dict[str, list]:
            if self._played is not None:  # a VLM's step: played before TRL rendered its images
                played, self._played = self._played, None
                return played
            return self.environment(prompts, trainer)

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            self._keys = [row["prompt"] for row in inputs]
            output = self._played_and_scored(inputs)
            if getattr(self.args, "advantage_std", "sample") != "sample":  # TRL's own is the sample std
                output["advantages"] = self._advantages(len(inputs)).to(output["advantages"])
            return output

        def _advantages(self, local: int) -> Any:
            """This process's rows' advantages from the step's gathered rewards with args.advantage_std."""
            from tsbench.train.advantages import group_advantages

            per_func = self._rewards_per_func
            rewards = (per_func * self.reward_weights.to(per_func.device).unsqueeze(0)).nansum(dim=1)
            rewards[torch.isnan(per_func).all(dim=1)] = torch.nan  # unscorable: out of the group, advantage 0
            values = group_advantages(rewards.cpu().numpy(), self.num_generations, std=self.args.advantage_std)
            start = self.accelerator.process_index * local
            return torch.as_tensor(values[start : start + local], dtype=torch.float32)

        def _played_and_scored(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            if self.environment.processor is None:
                return super()._generate_and_score_completions(inputs)
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
            self._rewards_per_func = super()._calculate_rewards(inputs, self._keys, *args)
            return self._rewards_per_func

        # -- forwards at their own width -----------------------------------------------------
        def _get_per_token_logps_and_entropies(
            self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, **kwargs
        ):
            base = super()._get_per_token_logps_and_entropies
            rows, full = input_ids.size(0), input_ids.size(1)
            batch_size = batch_size or rows
            vision = any(kwargs.get(k) is not None for k in VISION_KEYS)
            if vision and batch_size < rows:  # per-image tensors cannot be cut per chunk here: TRL's own path
                self.tokens.add(rows, full, full, int(attention_mask.sum()))
                return base(model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size, **kwargs)
            logps, entropies, aux = [], [], []
            for start in range(0, rows, batch_size):
                end = min(start + batch_size, rows)
                mask = attention_mask[start:end]
                first, last = attended_span(mask)
                first = min(first, full - logits_to_keep - 1)  # every row's prompt ends at the same column
                last = max(last, full - logits_to_keep)  # at least one completion column
                keep = logits_to_keep - (full - 1 - last)
                chunk = dict(kwargs)
                for key in PER_TOKEN_KEYS:
                    if chunk.get(key) is not None:
                        chunk[key] = chunk[key][start:end, first : last + 1]
                self.tokens.add(end - start, last + 1 - first, full, int(mask.sum()))
                lp, ent, loss = base(
                    model, input_ids[start:end, first : last + 1], mask[:, first : last + 1], keep, **chunk
                )
                pad = logits_to_keep - keep
                logps.append(torch.nn.functional.pad(lp, (0, pad)))
                if ent is not None:
                    entropies.append(torch.nn.functional.pad(ent, (0, pad)))
                if loss is not None:
                    aux.append(loss)
            return (
                torch.cat(logps, dim=0),
                torch.cat(entropies, dim=0) if entropies else None,
                torch.stack(aux).mean() if aux else None,
            )

        # -- the step's log, per episode -------------------------------------------------------
        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            if self.model.training:
                for key in [k for k in self._metrics["train"] if k.startswith("completions/")]:
                    del self._metrics["train"][key]  # per row, so per turn: replaced by episode/*
                logs.update(self.tokens.metrics())
                logs.update({k: v for k, v in self.environment.last.items() if k.startswith(("episode/", "tokens/"))})
                self.tokens = TokenCounts()
            super().log(logs, start_time)

    return EpisodeTrainer
