"""`kernel-agent apply RUN_DIR --into ENTRY --at PATH`: swap an optimized submodule into your model, check the whole
model's outputs, and report the end-to-end speedup.

    kernel-agent apply runs/02_model_layers_0_mlp --into mypkg.model:build --at model.layers.0.mlp

RUN_DIR is an `optimize --out` folder for a task file `hotspots --extract` wrote; `--at` defaults to the submodule
the task was extracted from. In code: `agent.swap.swap_in(model, at, run_dir, args, kwargs)` does the same and
leaves the kernel in place. Exit codes: 0 swapped and checked, 2 bad arguments, or a kernel that cannot be
swapped (no correct kernel in RUN_DIR, a state_dict that does not match, outputs that differ).
"""

from __future__ import annotations

import argparse
import json

from agent.entry import EntryError, load_entry
from agent.swap import read_run, swap_in, SwapError
from cli import checks
from cli.main import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("apply", help="swap an optimized submodule into your model and measure the whole forward",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="an `optimize --out` folder holding best.py")
    p.add_argument("--into", required=True, metavar="ENTRY", help="pkg.module:build or path/to/script.py:build")
    p.add_argument("--at", default="", help="the submodule to replace (default: the one the task was extracted from)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where the model runs (default: cuda when torch sees a GPU, else cpu)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads for the forward (default 1: the harness times kernels on one thread)")
    p.add_argument("--repeats", type=int, default=10, help="timed forwards of each version, alternating")
    p.add_argument("--json", action="store_true", help="print one JSON object (agent.swap.SwapOutcome)")


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    checks.torch_device(args)
    try:
        at = args.at or read_run(args.run_dir).task.SUBMODULE  # RUN_DIR is checked before the model is built
        entry = load_entry(args.into, args.device)
        outcome = swap_in(entry.model, at, args.run_dir, entry.args, entry.kwargs, args.device, args.repeats)
    except (EntryError, SwapError) as e:
        raise UsageError(str(e)) from None
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=1))
        return 0
    print(f"swapped {outcome.path}: the whole model's outputs match (max abs error {outcome.max_abs_error:.3g})")
    print(f"forward {outcome.original_ms:.3f} ms -> {outcome.swapped_ms:.3f} ms: {outcome.speedup:.3f}x end to end "
          f"(median of {outcome.repeats}, alternating)")
    return 0
