"""TSLM baselines of the paper's Table 1 (Section 4.1, Appendix C): a frozen Chronos-2 encoder, a
trainable fusion and a LoRA-adapted language backbone, in three architectures:

- `chatts`: full-resolution patch embeddings spliced into the token stream (chatts.py);
- `flamingo`: a Perceiver resampler and gated cross-attention to fixed latents (flamingo.py);
- `itformer`: fixed summary tokens aggregated from the series (itformer.py).

Toto-1.0-QA (`toto/<checkpoint>`, Table 1's Toto rows) shares the harness, trainer and OOM path:
toto_encoder.py (Datadog's Toto), toto_qa.py (series tokens + plot into a VLM), toto_checkpoint.py
(ARFBench's checkpoint layout, SFT runs), toto.py (the provider).

`tsbench sft-baseline --model tslm/<arch>` trains one (train/tslm_sft.py) into a run dir that
`tsbench eval --model tslm/<run dir>` plays under the `series` harness (provider.py).
"""
