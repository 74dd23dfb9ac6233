"""`kernel-agent hotspots ENTRY`: which submodules of your model take the forward's time; `--extract N --out DIR`
writes the top N as KernelBench-format task files for `kernel-agent optimize`.

    kernel-agent hotspots mypkg.model:build --device cpu
    kernel-agent hotspots path/to/script.py:build --extract 3 --out tasks/ --json

ENTRY names a function taking no arguments and returning `(model, inputs)` (docs/optimize.md). Exit codes:
0 done, 2 bad arguments or an ENTRY that does not import or returns something else.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from rich.console import Console
from rich.table import Table

from agent.entry import EntryError, load_entry
from agent.extract import extract_hotspots
from agent.hotspots import profile_hotspots
from cli import checks
from cli.main import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("hotspots", help="profile your model's submodules; extract the hot ones as task files",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("entry", metavar="ENTRY", help="pkg.module:build or path/to/script.py:build, returning (model, inputs)")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="where the forward runs (default: cuda when torch sees a GPU, else cpu)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads for the forward (default 1: the harness times kernels on one thread)")
    p.add_argument("--repeats", type=int, default=5, help="forwards profiled, after one untimed warm-up")
    p.add_argument("--top", type=int, default=15, help="rows of the table")
    p.add_argument("--extract", type=int, default=0, metavar="N", help="write the top N extractable submodules as task files")
    p.add_argument("--out", default="", help="folder for the task files (with --extract)")
    p.add_argument("--json", action="store_true", help="print one JSON object (the profile, and the extraction)")


def run(args: argparse.Namespace) -> int:
    if args.repeats < 1 or args.top < 1 or args.extract < 0:
        raise UsageError("--repeats and --top must be at least 1, --extract at least 0")
    if args.extract and not args.out:
        raise UsageError("--extract needs --out DIR")
    checks.torch_device(args)

    try:
        entry = load_entry(args.entry, args.device)
    except EntryError as e:
        raise UsageError(str(e)) from None

    err = Console(stderr=True)
    with err.status(f"profiling {args.entry} on {args.device}: warm-up forward") as status:
        report = profile_hotspots(entry, args.device, args.repeats,
                                  lambda i, n: status.update(f"profiling {args.entry} on {args.device}: forward {i}/{n}"))
    extraction = None
    if args.extract:
        with err.status(f"extracting the top {args.extract} submodules into {args.out}"):
            extraction = extract_hotspots(entry, report, args.extract, args.out, args.device)
    if args.json:
        print(json.dumps(report.to_dict() | ({"extraction": extraction.to_dict()} if extraction else {}), indent=1))
        return 0
    _print_table(report, args.top)
    if extraction is not None:
        _print_extraction(extraction, args.extract)
    return 0


def _print_table(report, top: int) -> None:
    table = Table(title=f"{report.entry} on {report.device}: forward {report.forward_ms:.2f} ms "
                        f"(mean of {report.repeats}; a row's time includes its submodules')")
    for column in ("#", "submodule", "class", "share", "ms/forward", "calls", "inputs (first call)"):
        table.add_column(column, no_wrap=column != "inputs (first call)", overflow="fold")
    for i, row in enumerate(report.modules[:top], 1):
        table.add_row(str(i), row.path, row.kind, f"{row.share:.1%}", f"{row.total_ms:.3f}", str(row.calls), row.inputs)
    Console(width=max(Console().width, 140)).print(table)


def _print_extraction(extraction, asked: int) -> None:
    for w in extraction.written:
        print(f"wrote {w.file}  ({w.path}, {w.share:.1%} of the forward)")
    for s in extraction.skipped:
        print(f"skipped {s.path}: {s.reason}")
    if len(extraction.written) < asked:
        sys.stderr.write(f"kernel-agent hotspots: {len(extraction.written)} of {asked} submodules could be extracted\n")
    if extraction.written:
        print(f"next: kernel-agent optimize {extraction.written[0].file} --out runs/{_stem(extraction.written[0].file)}")


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]
