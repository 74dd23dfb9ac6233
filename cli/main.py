"""`kernel-agent`: one console script, subcommands `tasks`, `eval`, `optimize`, `hotspots`, `apply`, `bench`, `sft`,
`train`, `view`.

A thin layer: each subcommand lives in `cli/<name>_cmd.py` with `add_parser(subparsers)` and `run(args)`,
imported only when chosen so that `kernel-agent tasks list` does not pay for transformers or trl.
Bad arguments exit 2 with a one-line reason; a model server that cannot be used exits 3; a broken harness
(its preflight failed, or `harness_error` results kept coming: `kernelbench.executors.evaluator.HarnessBroken`) exits 4
with one line naming the cause.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "tasks": "cli.tasks_cmd",
    "eval": "cli.eval_cmd",
    "optimize": "cli.optimize_cmd",
    "hotspots": "cli.hotspots_cmd",
    "apply": "cli.apply_cmd",
    "bench": "cli.bench_cmd",
    "sft": "cli.sft_cmd",
    "train": "cli.train_cmd",
    "view": "cli.view_cmd",
}


class UsageError(Exception):
    """Raised by a subcommand for bad arguments; printed as one line, exit 2."""


def add_executor_options(p: argparse.ArgumentParser, *, from_preset: bool = False) -> None:
    """`--executor`, `--ray-address`, `--max-in-flight` (bench, optimize, train). With `from_preset` the
    defaults are None, so that only options given on the command line override the preset's values."""
    p.add_argument("--executor", choices=("local", "ray"), default=None if from_preset else "local",
                   help="evaluate on this machine, or on Ray actors (docs/cluster.md)")
    p.add_argument("--ray-address", default=None if from_preset else "",
                   help="Ray cluster for --executor ray (default: start a local Ray; auto: the cluster this machine joined)")
    p.add_argument("--max-in-flight", type=int, default=None if from_preset else 0,
                   help="most unfinished evaluations at once (0: no bound)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints the whole usage otherwise)
        sys.stderr.write(f"kernel-agent: error: {message}\n")
        raise SystemExit(2)


def build_parser(argv: list[str]) -> tuple[argparse.ArgumentParser, dict[str, object]]:
    parser = _Parser(prog="kernel-agent", description="Train, run and benchmark an agent that writes fast, correct kernels.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    chosen = argv[0] if argv and not argv[0].startswith("-") else None
    if chosen in SUBCOMMANDS:
        mods = {chosen: importlib.import_module(SUBCOMMANDS[chosen])}
    else:
        mods = {name: importlib.import_module(modname) for name, modname in SUBCOMMANDS.items()}
    for mod in mods.values():
        mod.add_parser(sub)
    return parser, mods


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, mods = build_parser(argv)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return int(mods[args.command].run(args) or 0)
    except UsageError as e:
        sys.stderr.write(f"kernel-agent {args.command}: error: {e}\n")
        return 2
    except Exception as e:
        if _named(e, "ServerError"):
            sys.stderr.write(f"kernel-agent {args.command}: model server error: {e}\n")
            return 3
        if _named(e, "HarnessBroken"):  # the judge is broken: never a silent run (DESIGN.md, rule 6)
            sys.stderr.write(f"kernel-agent {args.command}: harness error: {e}\n")
            return 4
        raise


def _named(e: BaseException, name: str) -> bool:
    """Whether `e` is a `name` (cli.checks.ServerError, kernelbench's HarnessBroken and its PreflightFailed),
    without importing the harness for the commands that never load it."""
    return any(c.__name__ == name and c.__module__.split(".")[0] in ("cli", "kernelbench") for c in type(e).__mro__)


if __name__ == "__main__":  # `python -m cli.main`: run the importable module, whose UsageError the commands raise
    from cli.main import main as _main

    raise SystemExit(_main())
