"""One rank of `test_vllm_generation.py::test_server_mode_ranks_make_equal_collective_calls_under_duplicates_and_resume`.

    python -m torch.distributed.run --nproc_per_node 2 tests/collective_generation_worker.py MODEL_DIR OUT_DIR

Two gloo ranks run the project's real rollout (`train.rollout.HarnessRollout`: `agent.episode` over a batch,
its per-step trajectory log and resume) against TRL's real `VLLMGeneration` in server mode, whose engine is a
stand-in client on the main process (`vllm_standin`). Rank 0 draws one task twice, rank 1 has already logged
its whole step (a resume): their numbers of generate calls differ, and TRL's gather / broadcast / slice would
hang or hand one rank another's completions unless `train.generation` makes the calls collective. A mismatch
raises within the process group's 60 s timeout. Each rank writes `OUT_DIR/rank{r}.json`.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import Future
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from train import vllm_standin  # noqa: E402


class Verdicts:
    """An evaluator that answers at once (what is tested here is generation, not the harness)."""

    def __init__(self):
        self.submitted = 0

    def submit(self, task, candidate_src, group=""):
        from kernelbench.harness.result import INCORRECT, EvalResult

        self.submitted += 1
        fut: Future = Future()
        fut.set_result(EvalResult(status=INCORRECT, feedback="output mismatch"))
        return fut


class Fixed:
    """A local policy for the first, logged pass of rank 1 (`agent.policy.Policy`)."""

    def generate(self, prompts, sampling):
        from agent.policy import Completion

        return [Completion(text="no code", token_ids=(5, 6), logprobs=(-1.0, -1.0), prompt_token_ids=(1,),
                           finish_reason="stop", generate_s=0.0) for _ in prompts]


def main(model_dir: str, out_dir: str) -> None:
    from accelerate import Accelerator
    from accelerate.utils import InitProcessGroupKwargs
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agent.policy import SamplingConfig
    from agent.prompts import PromptSettings
    from kernelbench.tasks import catalog
    from rewards import ScoreConfig
    from train.generation import TRLVLLMPolicy, generation_policy
    from train.rollout import HarnessRollout

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=timedelta(seconds=60))])
    assert accelerator.num_processes == 2 and accelerator.distributed_type.name == "MULTI_CPU", accelerator.distributed_type
    rank = accelerator.process_index
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    vg = vllm_standin.StandInVLLMGeneration(model, accelerator, tokenizer, mode="server", max_completion_length=8)
    trainer = vllm_standin.StandInTrainer(vllm_generation=vg, accelerator=accelerator)

    task_a, task_b = catalog.find_task("L1/01_relu", "builtin"), catalog.find_task("L1/03_silu", "builtin")
    evaluator = Verdicts()
    rollout = HarnessRollout(evaluator=evaluator, trajectories=2, turns=2, sampling=SamplingConfig(max_tokens=8),
                             prompt_settings=PromptSettings(device="cpu"), score=ScoreConfig().score, log_dir=out_dir,
                             rank=rank)
    mine = [task_a, task_a] if rank == 0 else [task_b]
    if rank == 1:  # this rank's step 0 is already in its log: the resumed rollout generates nothing
        rollout.collect(Fixed(), mine, 0, seed=1)

    seen: list[dict] = []
    rounds = []
    for step in (0, 1):
        trainer.state.global_step = step
        vg.sync_weights()  # as GRPOTrainer does before it calls the rollout function at a new step
        with generation_policy(trainer, tokenizer, "vllm", training=True) as policy:
            assert isinstance(policy, TRLVLLMPolicy) and policy.collective
            real = policy.generate

            def checked(prompts, sampling, real=real):
                outs = real(prompts, sampling)
                for c in outs:
                    seen.append({"ok": list(c.token_ids) == vllm_standin.answer_for(list(c.prompt_token_ids)),
                                 "finite": vllm_standin.finite(c.logprobs)})
                return outs

            policy.generate = checked
            trajs = rollout.collect(policy, mine, step, seed=100 + step)
        rounds.append(policy.rounds)

    client = vg.vllm_client
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "rounds": rounds, "completions": len(seen), "all_own": all(s["ok"] for s in seen),
                   "finite_logprobs": all(s["finite"] for s in seen), "trajectories": len(trajs),
                   "client_calls": client.generate_calls if client else None,
                   "weight_pushes": client.weight_pushes if client else None,
                   "tensors_pushed": client.tensors_pushed if client else None,
                   "parameters": sum(1 for _ in model.parameters())}, f)
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
