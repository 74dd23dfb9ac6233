"""SFT warm start with TRL's SFTTrainer on solution trajectories.

    kernel-agent sft --preset cpu-tiny --out runs/cpu-tiny-sft
    kernel-agent sft --model PATH --data runs/train/trajectories/step_000010.jsonl --min-speedup 1.0

Examples are agent turns exactly as RL will see them: the prompt is built by `agent.prompts` (system
message, task, rules, worked example; for logged turns, the turn's own prompt with earlier attempts) and
the answer is a `<summary>` plus one python block, which `agent.parsing` reads back. Two sources:
- `solutions`: the reference solutions under kernelbench/solutions/<kind>/ (a task with both a `cpu` and
  a `cpu_slow` solution gets both, so the warm-started policy starts near 50/50 between a faster and a
  slower correct kernel, and RL has something to move);
- a trajectories.jsonl of earlier runs: only correct turns, optionally only those at least `min_speedup`
  fast (rejection sampling).
Loss is on the answer tokens only (TRL's completion-only loss for prompt/completion data). With
`model: tiny` a fresh tiny Qwen3 and its tokenizer are built first (train/tiny_model.py), and training
stops once the loss is low enough to reproduce the answers (REFERENCES.md: < 0.0005, not merely 0.016).
"""

from __future__ import annotations

import ast
import json
import os
import time
from dataclasses import dataclass
from typing import Any

from agent.prompts import PromptSettings, build_messages
from train.config import SFTConfig, save_config


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


def solution_answer(source: str) -> str:
    """A reference solution as the agent's answer: its docstring's first sentence as the summary, then
    the file in one python block (the shape `agent.parsing.parse_response` expects)."""
    doc = ast.get_docstring(ast.parse(source)) or "A custom kernel for this task."
    summary = " ".join(doc.split())
    return f"<summary>{summary}</summary>\n\n```python\n{source.strip()}\n```"


def solution_examples(config: SFTConfig) -> list[Example]:
    from kernelbench.catalog import find_task
    from kernelbench.solutions import find_solution, list_solutions

    settings = PromptSettings(device=config.device, hardware=config.hardware)
    task_ids = list(config.tasks) or sorted({s.task_id for k in config.solution_kinds for s in list_solutions(k)})
    examples = []
    for task_id in task_ids:
        task = find_task(task_id, "builtin")
        prompt = build_messages(task.source, [], settings)
        for kind in config.solution_kinds:
            sol = find_solution(task_id, kind)
            if sol is not None:
                examples.append(Example(task_id, kind, prompt, solution_answer(sol.source)))
    return examples


def trajectory_examples(path: str, only_correct: bool = True, min_speedup: float = 0.0) -> list[Example]:
    """Turns of a trajectories.jsonl (train's or the episode runner's log) worth imitating."""
    from agent.episode import Trajectory

    examples = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                traj = Trajectory.from_dict(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue
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
    return trajectory_examples(config.data, config.only_correct, config.min_speedup)


def build_model(config: SFTConfig, examples: list[Example]) -> tuple[Any, Any]:
    """A fresh tiny Qwen3 whose tokenizer is trained on the examples' texts, or a local checkpoint."""
    if config.model != "tiny":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        return AutoModelForCausalLM.from_pretrained(config.model), AutoTokenizer.from_pretrained(config.model)
    from train.tiny_model import TinyModelConfig, build_tiny

    texts = [m["content"] for e in examples for m in e.prompt] + [e.answer for e in examples]
    shape = TinyModelConfig(vocab_size=config.tiny_vocab_size, hidden_size=config.tiny_hidden_size,
                            num_layers=config.tiny_layers, num_heads=config.tiny_heads,
                            num_kv_heads=config.tiny_kv_heads, intermediate_size=config.tiny_intermediate_size,
                            seed=config.seed)
    return build_tiny(texts, shape)


def _stop_callback(target: float, window: int, log_path: str):
    from transformers import TrainerCallback

    class StopAtLoss(TrainerCallback):
        """Logs every step's loss to log.jsonl and stops once the mean of the last `window` is below target."""

        def __init__(self):
            self.losses: list[float] = []

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "loss" not in logs:
                return
            self.losses.append(float(logs["loss"]))
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"step": state.global_step, "loss": float(logs["loss"]),
                                    "lr": float(logs.get("learning_rate", 0.0))}) + "\n")
            recent = self.losses[-window:]
            if target > 0 and len(recent) == window and sum(recent) / window < target:
                control.should_training_stop = True

    return StopAtLoss()


def main(config: SFTConfig, say=print) -> SFTResult:
    """Build the data and the model, train with TRL's SFTTrainer, save a folder the hf backend loads."""
    from datasets import Dataset
    from trl import SFTConfig as TRLConfig
    from trl import SFTTrainer

    t0 = time.perf_counter()
    if config.torch_threads > 0:
        import torch

        torch.set_num_threads(config.torch_threads)
    save_config(config, config.out)
    examples = load_examples(config)
    if not examples:
        raise ValueError(f"no warm-start examples from {config.data!r} (tasks {list(config.tasks) or 'all'})")
    model, tokenizer = build_model(config, examples)
    rows = [{"prompt": e.prompt, "completion": [{"role": "assistant", "content": e.answer}]} for e in examples]
    lengths = [len(tokenizer(tokenizer.apply_chat_template(r["prompt"] + r["completion"], tokenize=False),
                             add_special_tokens=False)["input_ids"]) for r in rows]
    keep = [r for r, n in zip(rows, lengths) if n <= config.max_length]
    if len(keep) < len(rows):
        say(f"dropped {len(rows) - len(keep)} example(s) longer than {config.max_length} tokens")
    say(f"{len(keep)} examples from {len({e.task_id for e in examples})} task(s); longest {max(lengths)} tokens; "
        f"model {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    log_path = os.path.join(config.out, "log.jsonl")
    if os.path.exists(log_path):
        os.remove(log_path)
    args = TRLConfig(output_dir=os.path.join(config.out, "trainer"), max_steps=config.max_steps,
                     per_device_train_batch_size=config.batch_size, learning_rate=config.learning_rate,
                     lr_scheduler_type="constant", warmup_steps=0, logging_steps=1, save_strategy="no",
                     report_to="none", use_cpu=config.device == "cpu", seed=config.seed, max_length=config.max_length,
                     completion_only_loss=True, dataloader_num_workers=0, disable_tqdm=True, bf16=False)
    stopper = _stop_callback(config.target_loss, config.loss_window, log_path)
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(keep), processing_class=tokenizer,
                         callbacks=[stopper])
    trainer.train()
    model = trainer.model
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(config.out)
    tokenizer.save_pretrained(config.out)
    final = sum(stopper.losses[-config.loss_window:]) / max(1, len(stopper.losses[-config.loss_window:]))
    wall = time.perf_counter() - t0
    say(f"sft: {len(stopper.losses)} steps, final loss {final:.5f}, {wall:.0f} s -> {config.out}")
    return SFTResult(out_dir=config.out, steps=len(stopper.losses), final_loss=final, wall_s=wall, examples=len(keep))
