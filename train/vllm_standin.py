"""Stand-ins for what vLLM would be (no CPU wheel exists), under TRL's real `VLLMGeneration`: for the tests
of `train/generation.py` and the CPU rehearsal of the GPU presets (`scripts/rehearse_preset.py`).

TRL's own generation class runs unchanged: its weight sync (parameter gathering, LoRA merge), its server-mode
collectives (`gather_object` of prompts, `broadcast_object_list` of completions, the slice per rank) and its
colocate sleep/wake logic. Only the engine behind it is replaced:
- `StandInClient` for `VLLMClient` (server mode), on the main process: counts calls and the weights pushed;
- `StandInLLM` for `vllm.LLM` (colocate mode): counts wake-ups, sleeps, generations and weights loaded.
Both answer a prompt with a completion derived from the prompt alone (`answer_for`), so each rank can check
it got the answers to its own prompts and not a neighbour's slice, or with `StandInVLLMGeneration.answer`
when one is set (the rehearsal's answers, which carry kernels).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

from trl.generation import vllm_generation as trl_vllm_generation


def answer_for(prompt_ids: list[int]) -> list[int]:
    """The completion both stand-ins give: the prompt's length and its last three token ids, reversed."""
    return [len(prompt_ids) % 250 + 1] + list(reversed(prompt_ids[-3:]))


@dataclass
class StandInClient:
    """TRL's `VLLMClient` as the main process sees it."""

    answer: object = None
    """prompt token ids -> completion token ids (default `answer_for`)."""
    logprob: float = -0.5
    """The log-prob reported for every token (NaN: unknown, so TRL applies no importance-sampling correction)."""
    generate_calls: list[int] = field(default_factory=list)
    """Prompts per generate request."""
    weight_pushes: int = 0
    tensors_pushed: int = 0
    cache_resets: int = 0

    def generate(self, prompts, features=None, n=1, **_):
        self.generate_calls.append(len(prompts))
        completions = [(self.answer or answer_for)(list(p)) for p in prompts for _ in range(n)]
        return {"prompt_ids": [list(p) for p in prompts], "completion_ids": completions,
                "logprobs": [[[self.logprob] for _ in c] for c in completions], "logprob_token_ids": [[[t] for t in c] for c in completions]}

    def update_named_params(self, metadata, params):
        self.weight_pushes += 1
        self.tensors_pushed += sum(1 for _ in params)

    def reset_prefix_cache(self):
        self.cache_resets += 1


class _Weights:
    def __init__(self, llm: "StandInLLM"):
        self.llm = llm

    def load_weights(self, weights):
        self.llm.tensors_loaded += len(list(weights))


class StandInLLM:
    """`vllm.LLM` as TRL's colocate mode uses it."""

    def __init__(self, answer=None, logprob: float = -0.5):
        self.answer, self.logprob = answer or answer_for, logprob
        self.tensors_loaded = 0
        self.generate_calls: list[int] = []
        self.events: list[str] = []
        runner = SimpleNamespace(model=_Weights(self))
        self.llm_engine = SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)))

    def wake_up(self, tags=None):
        self.events.append("wake:" + ",".join(tags or []))

    def sleep(self, level=1):
        self.events.append(f"sleep:{level}")

    def reset_prefix_cache(self):
        self.events.append("reset")

    def generate(self, prompts, sampling_params=None, use_tqdm=False):
        self.generate_calls.append(len(prompts))
        self.events.append("generate")
        out = []
        for p in prompts:
            ids = self.answer(list(p["prompt_token_ids"]))
            lps = [{t: SimpleNamespace(rank=1, logprob=self.logprob)} for t in ids]
            out.append(SimpleNamespace(prompt_token_ids=p["prompt_token_ids"],
                                       outputs=[SimpleNamespace(token_ids=ids, logprobs=lps)]))
        return out


class SamplingParams(dict):
    """`vllm.SamplingParams` (TRL's colocate path builds one and passes it through)."""

    def __init__(self, **kw):
        super().__init__(**kw)


class StandInVLLMGeneration(trl_vllm_generation.VLLMGeneration):
    """TRL's class, with the engine start replaced by a stand-in (nothing else overridden)."""

    answer = None
    """Set on the class before TRL builds one (the rehearsal): the stand-in engines' answer function."""
    logprob = -0.5
    """Likewise: the log-prob the stand-in engines report per token (the rehearsal: NaN, unknown)."""

    def _init_vllm(self):
        if self.mode == "server":
            self.vllm_client = StandInClient(answer=self.answer, logprob=self.logprob) \
                if self.accelerator.is_main_process else None
        else:
            self.llm = StandInLLM(answer=self.answer, logprob=self.logprob)
            if self.enable_sleep_mode:
                self.llm.sleep(level=2)
            self._llm_weights_sleeping = self.enable_sleep_mode


def install_sampling_params(monkeypatch=None) -> None:
    """TRL imports `SamplingParams` from vLLM only when vLLM is installed; give its module the stand-in."""
    if monkeypatch is not None:
        monkeypatch.setattr(trl_vllm_generation, "SamplingParams", SamplingParams, raising=False)
    else:
        trl_vllm_generation.SamplingParams = SamplingParams


@dataclass
class StandInTrainer:
    """What `train.generation` reads of TRL's `GRPOTrainer`."""

    vllm_generation: object
    accelerator: object
    state: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(global_step=0))
    engine_weights: object = None
    """`train.generation.EngineWeights`, made on first use, as on `KernelGRPOTrainer`."""


def finite(values) -> bool:
    return all(math.isfinite(v) for v in values)
