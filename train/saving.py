"""`final/`: the trained policy as one folder that transformers (and the hf backend, and vLLM) load as it is.

Why every rank takes part: under ZeRO-3 and FSDP each process holds a shard of every weight; the unwrapped
model on rank 0 holds placeholders (ZeRO-3) or DTensor shards (FSDP2), and `save_pretrained` on rank 0 alone
wrote those. `accelerator.get_state_dict` gathers the full weights (a collective: every rank calls it; ZeRO-3
needs `zero3_save_16bit_model`, set in configs/accelerate/deepspeed-zero3.yaml) and returns them on the main
process. A LoRA run's adapters are merged into the gathered weights here (W + (alpha / r) B A, what peft's
`merge_and_unload` computes), since the placeholders cannot be merged in place.
"""

from __future__ import annotations

import re
from typing import Any

LORA_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<which>[AB])\.(?P<adapter>[^.]+)\.weight$")


def merge_lora(state: dict[str, Any], scaling: float) -> dict[str, Any]:
    """A peft model's full state dict with every LoRA pair merged into its base weight, under the base
    model's own key names (no `base_model.model.` prefix, no `.base_layer`)."""
    pairs: dict[str, dict[str, Any]] = {}
    for key, value in state.items():
        m = LORA_KEY.match(key)
        if m:
            pairs.setdefault(m.group("module"), {})[m.group("which")] = value
    out: dict[str, Any] = {}
    for key, value in state.items():
        if LORA_KEY.match(key):
            continue
        module = key[: -len(".base_layer.weight")] if key.endswith(".base_layer.weight") else None
        if module is not None and module in pairs:
            a, b = pairs[module]["A"], pairs[module]["B"]
            value = (value.float() + scaling * (b.float() @ a.float())).to(value.dtype)
        name = key.removeprefix("base_model.model.").replace(".base_layer.", ".")
        out[name] = value
    missing = [m for m, p in pairs.items() if set(p) != {"A", "B"} or f"{m}.base_layer.weight" not in state]
    if missing:
        raise ValueError(f"LoRA pairs without a base weight or a partner: {missing[:3]}")
    return out


def save_final(trainer: Any, tokenizer: Any, final: str, lora_rank: int, lora_alpha: int) -> None:
    """Write `final/` (call on every rank: the gather is a collective); the main process writes."""
    acc = trainer.accelerator
    state = acc.get_state_dict(trainer.model)  # full weights on the main process, gathered from every shard
    if acc.is_main_process:
        model = acc.unwrap_model(trainer.model)
        if lora_rank > 0:
            state = merge_lora(state, lora_alpha / lora_rank)
            model = model.get_base_model()
        model.save_pretrained(final, state_dict=state)
        tokenizer.save_pretrained(final)
    acc.wait_for_everyone()
