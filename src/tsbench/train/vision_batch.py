"""A vision-language policy's pixel inputs batched for generation, as TRL batches them for its loss."""

from __future__ import annotations

from typing import Any


def vision_token_ids(model: Any) -> list[int]:
    """A VLM's image and video placeholder ids (never to be generated); [] for a text model."""
    config = getattr(model, "config", None)
    ids = [getattr(config, key, None) for key in ("image_token_id", "video_token_id", "image_token_index")]
    return sorted({int(i) for i in ids if isinstance(i, int)})


def batch_vision(inputs: list[dict[str, Any]], lengths: list[int], width: int) -> dict[str, Any]:
    """The requests' pixel inputs as one batch, as TRL batches them for its loss: per-image tensors
    concatenated along the first axis; per-token ones (of the first prompt) zero-extended to each
    request's prompt length (a later turn's ids add no image) and left-padded to `width`."""
    import torch

    if not any(inputs):
        return {}
    if not all(inputs):
        raise ValueError("a batch mixes requests with and without images")
    from tsbench.models.local_vlm import PER_TOKEN_KEYS

    out = {}
    for key in inputs[0]:
        parts = [x[key] for x in inputs]
        if key in PER_TOKEN_KEYS:
            padded = torch.zeros((len(parts), width), dtype=parts[0].dtype)
            for row, (part, length) in enumerate(zip(parts, lengths)):
                start = width - length
                padded[row, start : start + part.shape[-1]] = part.reshape(-1)
            out[key] = padded
        else:
            out[key] = torch.cat(parts, dim=0)
    return out
