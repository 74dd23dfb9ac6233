"""The compile child's early build: ninja starts on the candidate's C++ before the child imports torch.

A cold compile stage was the child's `import torch` (2-4 s on 2 cores) followed by the compiler (10-15 s),
one after the other on a machine with a second core idle. When the parent can predict the build exactly
(`kernelbench.harness.build.prebuild.plan`: one `load_inline` call whose arguments are literals, and the toolchain's
`build.ninja` recorded by a trusted probe), it writes the build folder's two files into `prebuild.json`; this
module, run first in the child (`launch.child_argv`, stdlib only: nothing imports torch before it), writes them
and starts ninja, which then compiles while the child imports torch and the candidate.

Nothing here decides a verdict. When the candidate's `load_inline` runs, the hook waits for this build
(`settle`) before torch writes its own files, so torch's `_maybe_write` leaves identical files untouched and
torch's own ninja finds the build up to date; any difference (another name, other flags, a source the
prediction got wrong, a file the candidate changed) and torch's ninja rebuilds as it always did. A failed early
build is reported as torch would report it (`failure`) only while the folder still holds exactly the
predicted files; else torch's ninja runs. A build the candidate never asks for is stopped and removed
(`stop`) before the child reports: its library must not be symbol-checked as the candidate's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess

PLAN_FILE = "prebuild.json"
LOG_FILE = "prebuild.log"
FILES = ("main.cpp", "build.ninja")

_state: dict = {}
"""The one early build of this child: `dir`, `files`, `proc` (the ninja process), `log`, `settled` (its exit
status once waited for), `used` (torch's `load_inline` asked for this folder)."""


def start(scratch: str) -> None:
    """Write the parent's predicted build files and start ninja on them, if the parent sent a plan; never
    raises (a plan that cannot be followed only costs the time it would have saved)."""
    path = os.path.join(scratch, PLAN_FILE)
    try:
        with open(path) as f:
            plan = json.load(f)
        os.unlink(path)
    except (OSError, ValueError):
        return
    try:
        folder, files, jobs = str(plan["dir"]), plan["files"], str(plan.get("jobs") or "")
        if sorted(files) != sorted(FILES) or not all(isinstance(v, str) for v in files.values()):
            return
        os.makedirs(folder, exist_ok=True)
        for name in FILES:  # an identical file keeps its mtime (a built entry's object stays up to date)
            if _read(os.path.join(folder, name)) != files[name]:
                with open(os.path.join(folder, name), "w") as f:
                    f.write(files[name])
        log = open(os.path.join(scratch, LOG_FILE), "w+b")
        argv = ["ninja", "-v"] + (["-j", jobs] if re.fullmatch(r"[0-9]+", jobs) else [])
        # its own process group: `stop` ends ninja and the compiler it started together
        proc = subprocess.Popen(argv, cwd=folder, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except (OSError, KeyError, TypeError, ValueError):
        return
    _state.update(dir=os.path.realpath(folder), files=dict(files), proc=proc, log=log, settled=None, used=False)


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _mine(build_directory: str) -> bool:
    return bool(_state) and os.path.realpath(build_directory) == _state["dir"]


def settle(build_directory: str) -> None:
    """Wait for the early build of `build_directory`, if it is this child's (the hook calls this before torch
    writes the folder's files: a source rewritten while the compiler reads it would leave an object older
    in content than in time)."""
    if _mine(build_directory) and _state["settled"] is None:
        _state["used"] = True
        _state["settled"] = _state["proc"].wait()


def failure(build_directory: str) -> str | None:
    """The early build's output when it failed and the folder still holds exactly the predicted files (torch's
    ninja would rerun the same commands to the same end); else None (torch's ninja decides)."""
    if not _mine(build_directory) or _state["settled"] in (None, 0):
        return None
    if any(_read(os.path.join(build_directory, name)) != _state["files"][name] for name in FILES):
        return None
    log = _state["log"]
    log.seek(0)
    return log.read(1 << 20).decode("utf-8", "replace")


def stop() -> None:
    """End an early build the candidate's import never asked for, and remove what it wrote."""
    if not _state or _state["used"]:
        return
    proc = _state["proc"]
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
    shutil.rmtree(_state["dir"], ignore_errors=True)
    _state["used"] = True
