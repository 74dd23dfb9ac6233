"""The Ray executor's actors, plain classes that `kernelbench.executors.ray_evaluator.RayEvaluator` makes Ray
actors of: `CompileWorker` (the compile stage, one CPU) and `RunWorker` (the run stage, one GPU). Each
sandboxes its work exactly as a local worker does; neither imports Ray."""

from __future__ import annotations

import os

from kernelbench.executors.shipment import Shipment, pack_entry, unpack_entry
from kernelbench.harness.build import pch
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.evaluate import compile_stage, run_stage
from kernelbench.harness.reference_cache import ReferenceCache, Share
from kernelbench.harness.result import EvalResult
from kernelbench.tasks.task import Task


class CompileWorker:
    """The compile stage on one node (a Ray actor with one CPU)."""

    def __init__(self, compile_workers: int):
        self.jobs = max(1, (os.cpu_count() or 2) // compile_workers)  # ninja jobs, as the local Evaluator shares cores
        if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
            # Ray hides every GPU from an actor that holds none; a local compile child sees the node's GPUs,
            # and a candidate that touches CUDA at import must get the same verdict on both executors
            del os.environ["CUDA_VISIBLE_DEVICES"]

    def ready(self) -> int:
        pch.ensure_pch()  # the node's PCH before the first job, not inside its compile time limit
        return os.getpid()

    def compile(self, task: Task, src: str, config: EvalConfig) -> tuple[EvalResult | None, Shipment | None]:
        staged = compile_stage(task, src, config, self.jobs)
        if staged.decided is not None:
            return staged.decided, None
        return None, pack_entry(staged)


class RunWorker:
    """The run stage on one GPU (a Ray actor holding `num_gpus=1`; Ray sets its CUDA_VISIBLE_DEVICES).

    Its references of groups (`reference_cache`) live in this actor's process, never in the driver's: the
    candidates of one group that reach this actor share one reference child (timed on its own GPU, as they
    are), and a group spread over several actors computes one per actor. Outputs never cross the network."""

    def __init__(self) -> None:
        self.references = ReferenceCache()

    def ready(self) -> int:
        return os.getpid()

    def run(self, shipment: Shipment, ticket: str = "") -> EvalResult:
        unpack_entry(shipment)
        return run_stage(shipment.staged, Share(self.references, ticket) if ticket else None)

    def drop(self, ticket: str) -> None:
        """The group of `ticket` is done (`kernelbench.executors.groups`): free its references here."""
        self.references.drop(ticket)
