"""The trusted native library of the CPU children's perturbed load (`kernelbench/harness/child/fused_load.c`):
built here, by the parent, once per machine and compiler, and named to every CPU child in its environment
(`launch.FUSED_LOAD_ENV`), which maps it before any candidate code runs.

Why a library of the harness's own: the perturbed load is most of a timed trial's untimed work on the CPU
(the 8 MB ReLU of `scripts/bench_harness.py`: 2.25 ms of load around a 0.6-0.8 ms call, in both children of
every trial and check call); one pass in C takes ~0.8 ms (docs/harness.md, "Measured").

Where it cannot be built (no C compiler) the children use torch's ops for the same perturbation (other numbers,
the same rule): both children of an evaluation read the same environment, so they always agree. A library that
is named but cannot be mapped stops the child before the candidate loads (a harness fault, never a verdict).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kernelbench.harness.build.toolchain import tool_version
from kernelbench.harness.child import launch
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.isolation import sandbox

SOURCE = Path(launch.FUSED_LOAD_SOURCE)
FLAGS = ("-O3", "-fPIC", "-shared", "-std=c11")
"""Portable flags (no `-march=native`): the folder may be shared by machines of one cluster."""
DIR_ENV = "KERNEL_AGENT_NATIVE_DIR"
"""Where the library is kept (default `~/.cache/kernel-agent/native`)."""
OFF_ENV = "KERNEL_AGENT_FUSED_LOAD_OFF"
"""`1`: the children use torch's ops for the perturbed load (`scripts/bench_harness.py` measures both)."""
BUILD_TIMEOUT_S = 120.0
log = logging.getLogger(__name__)


def native_root() -> Path:
    return Path(os.environ.get(DIR_ENV) or os.path.expanduser("~/.cache/kernel-agent/native"))


def compiler() -> str:
    return shutil.which("cc") or shutil.which("gcc") or shutil.which("clang") or ""


@functools.lru_cache(maxsize=None)
def _library(root: str, cc: str) -> str:
    """The built library under `root` (built now when absent); "" where `cc` is "" or the build fails (said
    once in the log: the children then take torch's route, slower, judged alike)."""
    if not cc:
        return ""
    try:
        return _build(Path(root), cc)
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        log.warning("the perturbed-load library could not be built (%s): CPU children use torch's ops", e)
        return ""


def _build(root: Path, cc: str) -> str:
    source = SOURCE.read_bytes()
    key = hashlib.sha256(b"\n".join([source, " ".join(FLAGS).encode(), tool_version((cc, "--version")).encode()]))
    target = root / f"fused_load-{key.hexdigest()[:16]}.so"
    if target.is_file():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".fused_load-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        done = subprocess.run([cc, *FLAGS, "-o", tmp, str(SOURCE)], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"{cc} failed on {SOURCE.name}: {done.stderr[-600:]}")
        os.chmod(tmp, 0o755)  # the children's uids map it
        os.replace(tmp, target)  # whole or absent: another process may be reading the folder
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return str(target)


def library(config: EvalConfig) -> str:
    """The library CPU children of `config` map, "" for none (CUDA: the device draws its own; switched off)."""
    if config.device != "cpu" or os.environ.get(OFF_ENV) == "1":
        return ""
    return _library(str(native_root()), compiler())


def child_env(config: EvalConfig) -> tuple[tuple[str, str], ...]:
    """The environment entry that names the library to a child of `config` (none without one)."""
    path = library(config)
    return ((launch.FUSED_LOAD_ENV, path),) if path else ()


def child_binds(config: EvalConfig) -> tuple[sandbox.Bind, ...]:
    """The library's folder, read-only, for a child that starts its own interpreter in the sandbox (where a
    folder under `$HOME` is hidden); a child forked from a warm worker has it mapped already."""
    path = library(config)
    return (sandbox.Bind(os.path.dirname(path)),) if path else ()
