"""`--model toto/<checkpoint dir or SFT run>`: Toto-1.0-QA (Table 1's last two TSLM rows, "Toto
Qwen3-VL 32B" without and with SFT) as a model of the `series` harness.

`toto/<checkpoint>` (a directory in ARFBench's layout, or Datadog/Toto-1.0-QA-Experimental in the hub
cache; toto_checkpoint.py) is the "No SFT" row; `toto/<run dir>` from `sft-baseline --model
toto/<checkpoint>` is the SFT row. The series reaches Toto natively and the harness adds the plot;
running out of memory is an `oom` error as for every TSLM (provider.py).
"""

from __future__ import annotations

from tsbench.models.tslm.provider import TSLMChatModel

TOTO_OPTIONS = {"device", "max_new_tokens", "max_input_tokens", "toto_max_length", "toto_max_channels"}
INT_OPTIONS = ("max_new_tokens", "max_input_tokens", "toto_max_length", "toto_max_channels")


class TotoChatModel(TSLMChatModel):
    @classmethod
    def wants_plot(cls) -> bool:
        """The series harness renders the plot onto the user turn."""
        return True

    def __init__(
        self, checkpoint: str, *, toto_max_length: int | None = None, toto_max_channels: int | None = None, **kw
    ):
        self._encoder_limits = {"toto_max_length": toto_max_length, "toto_max_channels": toto_max_channels}
        super().__init__(checkpoint, **kw)

    def _load(self, run_dir: str, device: str | None):
        from tsbench.models.tslm.toto_checkpoint import load_any

        return load_any(run_dir, device=device, **self._encoder_limits)


def build_model(name: str, opts: dict) -> TotoChatModel:
    """The `toto` provider (-M device=cuda, -M max_new_tokens=N, -M max_input_tokens=N, -M toto_max_length=4096)."""
    from tsbench.core.extras import check
    from tsbench.models.registry import options_for
    from tsbench.models.tslm.toto_checkpoint import resolve_checkpoint
    from tsbench.models.tslm.toto_encoder import import_toto

    resolve_checkpoint(name)  # a missing checkpoint is one line before anything heavy loads
    check("torch", "transformers", "peft", extra="tslm", what="a toto/ model")
    import_toto()
    given = options_for("toto", TOTO_OPTIONS, opts, ints=INT_OPTIONS)
    return TotoChatModel(name, name=f"toto/{name}", **given)
