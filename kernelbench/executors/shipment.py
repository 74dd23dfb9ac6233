"""Shipping a build from the node that compiled it to the node that runs it (the Ray executor).

A compile actor returns the cache entry's files (`ext/` and the file's import outcome, an uncompressed tar
of well under a megabyte for a CPU op) beside the `Staged` job; a run actor whose node lacks the entry
unpacks them at the same absolute path (ninja's commands name absolute paths) before the run stage.
Rebuilding on the run node instead would put a 12-90 s compile on the GPU node's critical path for every new
candidate (in RL most are new), which is what the compile actors exist to avoid; shipping costs one
object-store transfer. The one foreign input is the node's precompiled header: the receiving actor makes
sure its node has one (`pch.ensure_pch`) and that its forwarder header is no newer than the shipped
objects, or ninja would rebuild inside every run child. Nodes must share the image (toolchain, Python,
paths): the cache key already names the toolchain, and a mismatch only costs a rebuild.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from kernelbench.harness.build import build_cache, pch
from kernelbench.harness.child.load_inline_hook import STANDARD_CFLAGS
from kernelbench.harness.staged import Staged

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shipment:
    """A compiled candidate on its way to a run actor."""

    staged: Staged
    artifact: bytes
    """Tar of the build cache entry's `ext/` and this file's import outcome (paths relative to the entry)."""
    mtimes_ns: tuple[tuple[str, int], ...] = ()
    """Each file's mtime in nanoseconds: ninja records them so, and tar keeps only a float of seconds, whose
    rounding alone can make an object look newer than its recorded dependency scan (a rebuild)."""


def _entry_lock(entry: Path) -> Path:
    return entry.parent / f"{entry.name}.lock"  # the lock `builder.build` takes for the same entry


def pack_entry(staged: Staged) -> Shipment:
    """`staged` with the files a run child needs of its build, read under the entry's lock (no half-written build)."""
    entry = Path(staged.build.entry_dir)
    outcome = entry / "imports" / f"{build_cache.source_key(staged.src, staged.config.device)}.json"
    buf = io.BytesIO()
    with open(_entry_lock(entry), "w") as lock, tarfile.open(fileobj=buf, mode="w") as tar:
        fcntl.flock(lock, fcntl.LOCK_SH)
        # not torch's build baton (`ext/NAME/lock`): a stale one would stall the run child's load_inline
        files = [p for p in (entry / "ext").rglob("*") if p.is_file() and not p.is_symlink()
                 and not (p.name == "lock" and p.parent.parent == entry / "ext")]
        files += [outcome] if outcome.exists() else []
        for path in files:
            tar.add(path, arcname=str(path.relative_to(entry)), recursive=False)
        mtimes = tuple((str(p.relative_to(entry)), p.stat().st_mtime_ns) for p in files)
    return Shipment(staged, buf.getvalue(), mtimes)


def _safe_member(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """The compile child (untrusted) wrote these files: no links out of the entry, no devices; skip such."""
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError:
        return None


def unpack_entry(shipment: Shipment) -> bool:
    """Recreate the shipped build at its own path when this node lacks it; True when it was unpacked."""
    entry = Path(shipment.staged.build.entry_dir)
    if not shipment.artifact or (entry / "built").exists():
        return False
    entry.mkdir(parents=True, exist_ok=True)
    with open(_entry_lock(entry), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (entry / "built").exists():
            return False
        with tarfile.open(fileobj=io.BytesIO(shipment.artifact)) as tar:
            tar.extractall(entry, filter=_safe_member)
        for rel, ns in shipment.mtimes_ns:  # ninja must find the build up to date, to the nanosecond
            path = entry / rel
            if path.is_file() and not path.is_symlink() and path.resolve().is_relative_to(entry.resolve()):
                os.utime(path, ns=(ns, ns))
        (entry / "built").touch()  # last: the entry is complete
    settle_pch_times(shipment.staged.build.pch_dir, entry / "ext", shipment.staged.src, shipment.staged.config.device)
    return True


def settle_pch_times(pch_dir: str, ext_dir: Path, src: str = "", device: str = "cpu") -> None:
    """Make this node's PCH files (gcc's forwarder header and .gch files, or clang's PCH for `src`'s flags)
    no newer than the shipped objects that depend on it.

    ninja rebuilds an object whose recorded time is older than any dependency, and a node that built its
    PCH after the compile node built the object would otherwise rebuild it inside every run child. The
    PCH folder is keyed by toolchain and flags, so its contents equal the compile node's; only its time
    differs. Older inputs never make a build stale, so this is safe for every build on the node."""
    if not pch_dir:
        return
    flags = pch.pch_flags(src) if src else STANDARD_CFLAGS
    if pch.pch_dir_for(pch.ensure_pch(flags, device), flags, device) != pch_dir:
        log.warning("this node's PCH folder differs from the compile node's (%s): shipped builds will be rebuilt "
                    "in the run stage; give every node the same image and paths", pch_dir)
        return
    outputs = [p.stat().st_mtime for p in ext_dir.rglob("*.o")]
    inputs = [Path(pch_dir, "torch", "extension.h"), *Path(pch_dir, "torch", "extension.h.gch").glob("*.gch"),
              Path(pch_dir, "extension.pch")]  # gcc's folder has the first ones, a clang one the last
    inputs = [p for p in inputs if p.exists()]
    for path in inputs:
        if outputs and path.stat().st_mtime >= min(outputs):
            when = min(outputs) - 1.0
            os.utime(path, (when, when))
