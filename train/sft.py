"""SFT warm start with TRL's SFTTrainer on solution trajectories.

    kernel-agent sft --preset cpu-tiny --out runs/cpu-tiny-sft
    kernel-agent sft --model PATH --data runs/train/trajectories/step_000010.jsonl --min-speedup 1.0

Examples are agent turns exactly as RL will see them: the prompt is built by `agent.prompts` (system
message, task, rules, worked example; for logged turns, the turn's own prompt with earlier attempts) and
the answer is a `<summary>` plus one python block, which `agent.parsing` reads back. Two sources:
- `solutions`: the reference solutions under kernelbench/tasks/solutions/<kind>/ (a task with both a `cpu` and
  a `cpu_slow` solution gets both, so the warm-started policy starts near 50/50 between a faster and a
  slower correct kernel, and RL has something to move);
- a trajectories.jsonl of earlier runs: only correct turns, optionally only those at least `min_speedup`
  fast (rejection sampling).
Loss is on the answer tokens only (TRL's completion-only loss for prompt/completion data). With
`model: tiny` a fresh tiny Qwen3 and its tokenizer are built first (train/tiny_model.py), and training
stops once the loss is low enough to reproduce the answers (REFERENCES.md: < 0.0005, not merely 0.016).
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from typing import Any

from agent.prompts import PromptSettings, build_messages
from kernelbench.config_files import save_config
from train.config import SFTConfig
from train.precision import autocast_bf16
from train.solution_text import compact_source, solution_answer, solution_summary  # noqa: F401 (sft's names)
import torch
from agent.hf_backend import HFPolicy
from agent.parsing import parse_response
from agent.policy import SamplingConfig
from agent.trajectory import read_trajectories
from kernelbench.tasks.catalog import find_task
from kernelbench.tasks.solutions import find_solution, list_solutions
from train.family_examples import family_examples
from train.precision import load_dtype
from train.tiny_model import TinyModelConfig, build_tiny

# Imports inside functions: transformers, peft, datasets and trl (0.1-3 s each to import) load when a warm start
# runs, not when this module is imported for its records and helpers.


@dataclass(frozen=True)
class Example:
    """One warm-start example: an agent turn's prompt and the answer to learn."""

    task_id: str
    source: str
    """`cpu`, `cpu_slow`, `cuda` or `trajectory`."""
    prompt: list[dict[str, str]]
    answer: str


@dataclass(frozen=True)
class SFTResult:
    out_dir: str
    steps: int
    final_loss: float
    wall_s: float
    examples: int
    loss_floor: float = 0.0
    """The data's lowest reachable mean loss (see `loss_floor`)."""
    train_s: float = 0.0
    """Wall time of data, model and training (without the sample check)."""
    checks: tuple[dict[str, Any], ...] = ()
    """`SampleCheck.to_dict()` of each prompt (empty when `check_samples` is 0)."""


def prompt_settings(config: SFTConfig) -> PromptSettings:
    return PromptSettings(device=config.device, hardware=config.hardware, style=config.prompt_style)


def solution_examples(config: SFTConfig) -> list[Example]:
    settings = prompt_settings(config)
    task_ids = list(config.tasks) or sorted({s.task_id for k in config.solution_kinds for s in list_solutions(k)})
    examples = []
    for task_id in task_ids:
        task = find_task(task_id, "builtin")
        prompt = build_messages(task.shown_source, [], settings)
        for kind in config.solution_kinds:
            sol = find_solution(task_id, kind)
            if sol is not None:
                copies = config.slow_copies if kind == "cpu_slow" else 1
                examples += [Example(task_id, kind, prompt, solution_answer(sol.source, config.compact_solutions))] * copies
    return examples


def trajectory_examples(path: str, only_correct: bool = True, min_speedup: float = 0.0) -> list[Example]:
    """Turns of a trajectories.jsonl (train's or the episode runner's log) worth imitating."""

    examples = []
    for traj in read_trajectories(path):
        for turn in traj.new_turns:
            if only_correct and turn.result.status != "correct":
                continue
            if turn.result.speedup < min_speedup:
                continue
            examples.append(Example(traj.task_id, "trajectory", turn.prompt, turn.response))
    return examples


def load_examples(config: SFTConfig) -> list[Example]:
    if config.data == "solutions":
        return solution_examples(config)
    if config.data.startswith("family:"):
        return family_examples(config, Example)
    return trajectory_examples(config.data, config.only_correct, config.min_speedup)


def lora_config(config: SFTConfig) -> Any:
    """peft's LoraConfig over every linear layer, or None for full fine-tuning."""
    if config.lora_rank <= 0:
        return None
    from peft import LoraConfig

    return LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM")


def build_model(config: SFTConfig, examples: list[Example]) -> tuple[Any, Any]:
    """A fresh tiny Qwen3 whose tokenizer is trained on the examples' texts, or a local checkpoint."""
    if config.model != "tiny":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        # fp32 master weights for what trains (train/precision.py); transformers would load the checkpoint's bf16
        model = AutoModelForCausalLM.from_pretrained(config.model, dtype=load_dtype(config.dtype, config.lora_rank))
        return model, AutoTokenizer.from_pretrained(config.model)

    texts = [m["content"] for e in examples for m in e.prompt] + [e.answer for e in examples]
    shape = TinyModelConfig(vocab_size=config.tiny_vocab_size, hidden_size=config.tiny_hidden_size,
                            num_layers=config.tiny_layers, num_heads=config.tiny_heads,
                            num_kv_heads=config.tiny_kv_heads, intermediate_size=config.tiny_intermediate_size,
                            seed=config.seed, merge_across_words=config.tiny_merge_across_words)
    return build_tiny(texts, shape)


PROGRESS_LINES = 20
"""Progress lines an SFT run prints (one every 1/20 of `max_steps`, and the last step)."""


def progress_line(step: int, total: int, loss: float, target: float, elapsed_s: float, width: int = 24) -> str:
    """`sft [#########---------------] 180/480 loss 0.01234 (target 0.00160) 62 s`: one line, no carriage
    return, so a log file reads as well as a terminal."""
    done = min(width, round(width * step / max(1, total)))
    goal = f" (target {target:.5f})" if target > 0 else ""
    return f"sft [{'#' * done}{'-' * (width - done)}] {step}/{total} loss {loss:.5f}{goal} {elapsed_s:.0f} s"


def _stop_callback(target: float, window: int, log_path: str, say=print):
    from transformers import TrainerCallback

    class StopAtLoss(TrainerCallback):
        """Logs every step's loss to log.jsonl, prints a progress line every 1/PROGRESS_LINES of the run, and
        stops once the mean of the last `window` is below target."""

        def __init__(self):
            self.losses: list[float] = []
            self.t0 = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "loss" not in logs:
                return
            self.losses.append(float(logs["loss"]))
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"step": state.global_step, "loss": float(logs["loss"]),
                                    "lr": float(logs.get("learning_rate", 0.0))}) + "\n")
            recent = self.losses[-window:]
            mean = sum(recent) / len(recent)
            if target > 0 and len(recent) == window and mean < target:
                control.should_training_stop = True
            every = max(1, state.max_steps // PROGRESS_LINES)
            if state.global_step % every == 0 or state.global_step >= state.max_steps or control.should_training_stop:
                say(progress_line(state.global_step, state.max_steps, mean, target, time.perf_counter() - self.t0))

    return StopAtLoss()


def loss_floor(examples: list[Example], answer_tokens: list[int]) -> float:
    """Lowest mean per-token loss a perfect memoriser reaches on these examples: where a prompt's answers
    part, an answer given c times out of the prompt's m examples costs −ln(c/m) (ln k for k distinct answers
    given once each), spread over the answer's tokens; averaged over examples, as single-example steps
    sample them."""
    counts: dict[str, dict[str, int]] = {}
    for e in examples:
        by_answer = counts.setdefault(json.dumps(e.prompt), {})
        by_answer[e.answer] = by_answer.get(e.answer, 0) + 1
    per = []
    for e, n in zip(examples, answer_tokens):
        by_answer = counts[json.dumps(e.prompt)]
        per.append(-math.log(by_answer[e.answer] / sum(by_answer.values())) / max(1, n))
    return sum(per) / max(1, len(per))


@dataclass(frozen=True)
class SampleCheck:
    """Answers sampled from the trained model for one prompt, sorted by what they reproduce."""

    task_id: str
    samples: int
    exact: dict[str, int]
    """Answers whose code equals a training answer's code, by that answer's source (`cpu`, `cpu_slow`...)."""
    parseable: int
    """Answers `agent.parsing` accepts (a python block defining ModelNew), exact ones included."""
    temperature: float
    """Sampling temperature of the check (`SFTConfig.check_temperature`, not necessarily the RL run's)."""

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "samples": self.samples, "exact": dict(self.exact), "parseable": self.parseable,
                "temperature": self.temperature}


def check_samples(model: Any, tokenizer: Any, examples: list[Example], samples: int, temperature: float,
                  max_tokens: int, seed: int = 0, max_prompts: int = 0) -> list[SampleCheck]:
    """Sample each prompt's answer `samples` times and count exact reproductions and parseable answers
    (the test that memorisation is good enough: REFERENCES.md, a loss of 0.016 still gave 0 parseable)."""

    policy = HFPolicy(model, tokenizer)
    by_prompt: dict[str, list[Example]] = {}
    for e in examples:
        by_prompt.setdefault(json.dumps(e.prompt), []).append(e)
    groups = list(by_prompt.values())
    if 0 < max_prompts < len(groups):  # evenly spread, so first and later turns are both checked
        groups = [groups[round(k * (len(groups) - 1) / (max_prompts - 1))] if max_prompts > 1 else groups[0]
                  for k in range(max_prompts)]
    checks = []
    for i, group in enumerate(groups):
        refs = {e.source: parse_response(e.answer).code.strip() for e in group}
        outs = policy.generate([group[0].prompt] * samples,
                               SamplingConfig(temperature=temperature, max_tokens=max_tokens, seed=seed + 1000 * i))
        exact = {k: 0 for k in refs}
        parseable = 0
        for o in outs:
            parsed = parse_response(o.text)
            parseable += parsed.ok
            for k, code in refs.items():
                if parsed.ok and parsed.code.strip() == code:
                    exact[k] += 1
                    break
        checks.append(SampleCheck(task_id=group[0].task_id, samples=samples, exact=exact, parseable=parseable,
                                  temperature=temperature))
    return checks


def main(config: SFTConfig, say=print) -> SFTResult:
    """Build the data and the model, train with TRL's SFTTrainer, save a folder the hf backend loads."""
    from datasets import Dataset
    from trl import SFTConfig as TRLConfig
    from trl import SFTTrainer

    t0 = time.perf_counter()
    if config.torch_threads > 0:
        torch.set_num_threads(config.torch_threads)
    save_config(config, config.out)
    examples = load_examples(config)
    if not examples:
        raise ValueError(f"no warm-start examples from {config.data!r} (tasks {list(config.tasks) or 'all'})")
    model, tokenizer = build_model(config, examples)
    rows = [{"prompt": e.prompt, "completion": [{"role": "assistant", "content": e.answer}]} for e in examples]

    def n_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    lengths = [n_tokens(tokenizer.apply_chat_template(r["prompt"] + r["completion"], tokenize=False)) for r in rows]
    answer_tokens = [n - n_tokens(tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True))
                     for r, n in zip(rows, lengths)]
    kept = [i for i, n in enumerate(lengths) if n <= config.max_length]
    if len(kept) < len(rows):
        say(f"dropped {len(rows) - len(kept)} example(s) longer than {config.max_length} tokens")
    floor = loss_floor([examples[i] for i in kept], [answer_tokens[i] for i in kept])
    say(f"{len(kept)} examples from {len({e.task_id for e in examples})} task(s); tokens per example "
        f"{min(lengths)}-{max(lengths)} (answers {min(answer_tokens)}-{max(answer_tokens)}); loss floor {floor:.5f}; "
        f"model {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    log_path = os.path.join(config.out, "log.jsonl")
    if os.path.exists(log_path):
        os.remove(log_path)
    args = TRLConfig(output_dir=os.path.join(config.out, "trainer"), max_steps=config.max_steps,
                     per_device_train_batch_size=config.batch_size, learning_rate=config.learning_rate,
                     lr_scheduler_type=config.lr_schedule, warmup_steps=0, logging_steps=1, save_strategy="no",
                     report_to="none", use_cpu=config.device == "cpu", seed=config.seed, max_length=config.max_length,
                     completion_only_loss=True, dataloader_num_workers=0, disable_tqdm=True,
                     bf16=autocast_bf16(config.dtype, config.device), gradient_checkpointing=config.gradient_checkpointing)
    target = floor + config.target_loss if config.target_loss > 0 else 0.0
    stopper = _stop_callback(target, config.loss_window, log_path, say)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list([rows[i] for i in kept]),
                         processing_class=tokenizer, callbacks=[stopper], peft_config=lora_config(config))
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # its raw `{'loss': ...}` dict per step: the progress lines say it
    trainer.train()
    model = trainer.model
    if config.lora_rank > 0:  # one folder the hf backend and the RL run load as they are: adapters merged in
        model = model.merge_and_unload()
    model.eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(config.out)
    tokenizer.save_pretrained(config.out)
    final = sum(stopper.losses[-config.loss_window:]) / max(1, len(stopper.losses[-config.loss_window:]))
    train_s = time.perf_counter() - t0
    say(f"sft: {len(stopper.losses)} steps, final loss {final:.5f} (floor {floor:.5f}), {train_s:.0f} s -> {config.out}")
    checks: list[SampleCheck] = []
    if config.check_samples > 0:
        checks = check_samples(model, tokenizer, [examples[i] for i in kept], config.check_samples,
                               config.check_temperature, max_tokens=max(answer_tokens) + 32, seed=config.seed,
                               max_prompts=config.check_prompts)
        with open(os.path.join(config.out, "check.json"), "w", encoding="utf-8") as f:
            json.dump([c.to_dict() for c in checks], f, indent=1)
        for c in checks:
            say(f"sft check {c.task_id}: {c.samples} samples at T={c.temperature}: exact {c.exact}, "
                f"parseable {c.parseable}")
    wall = time.perf_counter() - t0
    return SFTResult(out_dir=config.out, steps=len(stopper.losses), final_loss=final, wall_s=wall, examples=len(kept),
                     loss_floor=floor, train_s=train_s, checks=tuple(c.to_dict() for c in checks))
