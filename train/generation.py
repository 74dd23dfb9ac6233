"""The policies a training rollout samples from: the trainer's own weights (transformers `generate`) or
TRL's vLLM engine, both behind `agent.policy.Policy`."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

import torch

# Imports inside functions: accelerate and trl's vLLM client (0.1-3 s each to import) load when generation through
# the trainer runs, not when this module is imported for its records and helpers.


def chat_ids(tokenizer: Any, conversation: Any) -> list[int]:
    """Token ids of a conversation rendered with the chat template and the assistant header, as the hf
    backend encodes them (the template as text, then tokenised without special tokens)."""
    text = tokenizer.apply_chat_template(list(conversation), add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


class TRLVLLMPolicy:
    """`agent.policy.Policy` over TRL's vLLM integration (colocate or server), for one rollout
    (`generation_policy`).

    In server mode TRL's `generate` is a collective: it gathers every rank's prompts, the main process asks the
    server, and each rank keeps the slice at `process_index * len(prompts)`. So every rank must call it the same
    number of times with the same number of prompts, which a multi-turn rollout does not do by itself (a task
    drawn twice on one rank, trajectories that stop early, a resume that skips logged groups). Here each call
    is a round: the ranks first agree on the largest prompt count (an all-gather of counts), every rank pads to
    it with copies of a prompt, and `finish` keeps a rank that is done answering rounds (with filler prompts)
    until every rank is done. The padding costs generation only when ranks are uneven. Colocated vLLM with
    `vllm_tensor_parallel_size` > 1 gathers within its group alike; rounds over the whole world cover it.
    Streamed turns (`agent.episode.EpisodeRunner`) make more, smaller calls and a number per rank that depends
    on when verdicts return: rounds take any number of calls of any size per rank, so the contract holds.

    Sampling settings come from TRL's `GRPOConfig`, not from `generate`'s `sampling`: TRL seeds its engine
    once per process and takes no seed per call or per prompt, so a rollout through it does not repeat draw
    for draw, streamed or not (the hf, vllm and openai backends honour `SamplingConfig.seeds`)."""

    def __init__(self, trainer: Any, tokenizer: Any):
        self.trainer, self.tokenizer = trainer, tokenizer
        vg = trainer.vllm_generation
        # colocated vLLM with tensor parallelism gathers and slices prompts the same way within its group
        self.collective = trainer.accelerator.num_processes > 1 and (
            vg.mode == "server" or int(getattr(vg, "tensor_parallel_size", 1) or 1) > 1)
        self.filler: list[int] = []
        self.rounds = 0

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _agree(self, count: int, done: bool = False) -> tuple[int, bool]:
        """This round's largest prompt count over the ranks, and whether every rank is done (`finish`)."""
        from accelerate.utils import gather_object

        said = gather_object([(count, done)])
        return max(c for c, _ in said), all(d for _, d in said)

    def _generate_ids(self, ids: list[list[int]]) -> tuple[list, list]:
        if self.collective:
            target, _ = self._agree(len(ids))
            self.rounds += 1
            padded = ids + [ids[0] if ids else self._filler()] * (target - len(ids))
        else:
            padded = ids
        if not padded:
            return [], []
        _, completion_ids, logprobs, _ = self.trainer.vllm_generation.generate(padded, None, 1)
        completion_ids = list(completion_ids)[:len(ids)]
        if logprobs is None:  # not asked of vLLM: unknown, NaN below
            return completion_ids, [[None] * len(c) for c in completion_ids]
        return completion_ids, list(logprobs)[:len(ids)]

    def _filler(self) -> list[int]:
        """A prompt to pad a round with: the first this rank sent, or a one-message conversation."""
        if not self.filler:
            self.filler = chat_ids(self.tokenizer, [{"role": "user", "content": "."}])
        return self.filler

    def generate(self, prompts: list, sampling: Any) -> list:
        from agent.policy import Completion

        t0 = time.perf_counter()
        ids = [chat_ids(self.tokenizer, p) for p in prompts]
        if ids and not self.filler:
            self.filler = ids[0]
        completion_ids, logprobs = self._generate_ids(ids)
        elapsed = time.perf_counter() - t0
        eos = self.tokenizer.eos_token_id
        return [Completion(text=self.tokenizer.decode(c, skip_special_tokens=True), token_ids=tuple(c),
                           logprobs=tuple(float(lp[0]) if lp and lp[0] is not None else float("nan") for lp in lps),
                           prompt_token_ids=tuple(p), finish_reason="stop" if c and c[-1] == eos else "length",
                           generate_s=elapsed)
                for p, c, lps in zip(ids, completion_ids, logprobs)]

    def finish(self) -> None:
        """Server mode: answer the other ranks' rounds until every rank is done (see the class)."""
        if not self.collective:
            return
        while True:
            target, all_done = self._agree(0, done=True)
            if all_done:
                return
            self.rounds += 1
            if target:  # every rank skips a round of no prompts alike (`_generate_ids`)
                self.trainer.vllm_generation.generate([self._filler()] * target, None, 1)


@dataclass
class EngineWeights:
    """What the project knows of the weights in TRL's vLLM engine, kept by the rollouts themselves: TRL keeps its
    own account in private attributes, which nothing here reads or writes (`vllm_rollout`)."""

    trl_synced_step: int = -1
    """The global step at which TRL last pushed the weights itself. `GRPOTrainer` does so just before it calls the
    rollout function at each new global step (and only then), so a training rollout keeps this mirror exact."""
    step: int = -1
    """The global step whose weights the engine holds (-1: none yet)."""
    asleep: bool = False
    """A level-2 sleep discarded them (TRL's at start-up with sleep mode, then ours at each rollout's end)."""


def engine_weights(trainer: Any) -> EngineWeights:
    """The trainer's `EngineWeights`, made on first use (with sleep mode the engine starts asleep)."""
    if trainer.engine_weights is None:
        vg = trainer.vllm_generation
        trainer.engine_weights = EngineWeights(asleep=vg.mode == "colocate" and bool(vg.enable_sleep_mode))
    return trainer.engine_weights


@contextlib.contextmanager
def vllm_rollout(trainer: Any, training: bool):
    """One rollout's vLLM state: weights synced at most once, and kept awake for every call.

    Why: TRL syncs the weights once per step before calling the rollout function, but in colocate mode with
    sleep mode its `generate` puts the engine to sleep at level 2 after every call (the weights are discarded)
    and pushes all the weights again on the next one: T turns x waves full syncs per step. Here the engine is
    woken once, TRL's per-call sleep is held off for the rollout (`enable_sleep_mode`, public), and it sleeps
    once at the end. `training`: TRL called the rollout function (it has just synced at a new step); otherwise
    (held-out evaluation from a callback) nothing is assumed. A rollout that finds the weights asleep or of
    another step pushes them first (`sync_weights`, public). The account is the project's (`EngineWeights`):
    after a held-out evaluation's push TRL pushes again at its next step's rollout, one push it could have
    skipped, the price of not writing its private step counter."""
    vg = trainer.vllm_generation
    weights = engine_weights(trainer)
    sleeps = vg.mode == "colocate" and bool(vg.enable_sleep_mode)
    step = trainer.state.global_step
    if training and step != weights.trl_synced_step:  # GRPOTrainer pushed them just now, as every new step
        weights.trl_synced_step = weights.step = step
        weights.asleep = False
    if weights.asleep or weights.step != step:
        vg.sync_weights()  # a collective in server mode and under ZeRO-3 / FSDP: every rank is here at this step
        weights.step, weights.asleep = step, False
    if sleeps:
        vg.llm.wake_up(tags=["kv_cache"])
        vg.enable_sleep_mode = False  # TRL's generate neither wakes nor sleeps the engine while this holds
    try:
        yield
    finally:
        if sleeps:
            vg.enable_sleep_mode = True
            vg.llm.sleep(level=2)
            weights.asleep = True


@contextlib.contextmanager
def generation_policy(trainer: Any, tokenizer: Any, backend: str, training: bool):
    """The policy a rollout samples from: the trainer's current weights (transformers `generate`, unwrapped
    from DDP/FSDP/ZeRO-3) or TRL's vLLM engine. `training`: TRL called the rollout function (`vllm_rollout`)."""
    if backend == "vllm":
        with vllm_rollout(trainer, training):
            policy = TRLVLLMPolicy(trainer, tokenizer)
            yield policy
            policy.finish()  # not on an exception: a rank that failed stops the run, and its peers with it
        return
    from agent.hf_backend import HFPolicy
    from trl.models import unwrap_model_for_generation

    with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                     gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs) as model:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                yield HFPolicy(model, tokenizer)
        finally:
            model.train(was_training)
