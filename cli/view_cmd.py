"""`kernel-agent view RUN_DIR [--out FILE.html]`: one self-contained HTML page of a bench, optimize or train run.

    kernel-agent view runs/bench-my-model                 # writes runs/bench-my-model/view.html
    kernel-agent view optimize_out --out ~/optimize.html

The page holds its data, scripts and plots inside (no network; it opens from disk): a task table that
filters by level, status and origin, and per trajectory each turn's kernel with a diff against the turn
before, the harness's feedback and flags, the model's summary and its reasoning. See docs/bench.md.
"""

from __future__ import annotations

import argparse
import os

from cli.main import UsageError
from evals.viewer import ViewError, write_view


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("view", help="one self-contained HTML page to read a run's trajectories",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", metavar="RUN_DIR", help="a bench, optimize, train or train --pipeline output folder")
    p.add_argument("--out", default="", help="HTML file to write (default RUN_DIR/view.html)")


def run(args: argparse.Namespace) -> int:
    try:
        path = write_view(args.run_dir, args.out)
    except ViewError as e:
        raise UsageError(str(e)) from None
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB); open it in a browser")
    return 0
