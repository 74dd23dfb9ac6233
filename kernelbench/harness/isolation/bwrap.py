"""The bubblewrap command line of a sandboxed child: what it binds, hides and unshares.

`find_bwrap` probes once whether bubblewrap (with `setpriv`) runs here; `bwrap_argv` builds the command for
one `sandbox.ChildSpec`: read-only root, private `/tmp` and `/dev/shm` of a bounded size, `$HOME` hidden under a tmpfs with only
what the child needs re-bound read-only (`child_readonly_paths`), fresh `/dev` and `/proc`, own
ipc/pid/net/uts namespaces, a new session, a cleared environment, and `setpriv` to the slot's uid with all
capabilities dropped. What that covers and what it does not: `kernelbench.harness.isolation.sandbox`.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def find_bwrap() -> str:
    """Path of a working bubblewrap (probed once), or empty. Tests monkeypatch this to force the fallback."""
    return _probe_bwrap()


_BWRAP_PROBE: dict[str, str] = {}


def _probe_bwrap() -> str:
    if "path" not in _BWRAP_PROBE:
        path = shutil.which("bwrap") or ""
        if path and shutil.which("setpriv"):
            try:
                ok = subprocess.run([path, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true"],
                                    capture_output=True, timeout=30).returncode == 0
            except (OSError, subprocess.SubprocessError):
                ok = False
            path = path if ok else ""
        else:
            path = ""
        _BWRAP_PROBE["path"] = path
    return _BWRAP_PROBE["path"]


CGROUP_ROOT = "/sys/fs/cgroup"
"""Covered by an empty tmpfs in every sandbox: the child needs nothing there (the parent moves it into its cgroup
before it starts and does the freezing), and the root's read-only view of it let a candidate read every cgroup's
live CPU and memory counters and process list: the paired reference's, other evaluations'."""


def hidden_roots() -> tuple[str, ...]:
    """Host folders the sandbox covers with a private tmpfs: $HOME (when it is not / or /tmp) and /tmp."""
    home = os.path.realpath(os.path.expanduser("~"))
    return ((home,) if home not in ("/", "/tmp") and os.path.isdir(home) else ()) + ("/tmp",)


def child_readonly_paths() -> list[str]:
    """Paths the child needs that lie under a hidden root ($HOME, /tmp), to re-bind read-only after the tmpfs.

    The interpreter (its prefix, its base prefix, the real path of the executable), its site-packages (the
    user site too), the project, and every sys.path entry but the first (an editable install's finder names its
    source folder there), wherever they live: a clone or a virtual environment under /tmp judges like any other.
    Not the first entry: it is the running script's folder or the working folder, which the children import
    nothing from (they start isolated, `-I`), and a script under /tmp bound its folder, with the build cache the
    user kept beside it, into every sandbox.
    Never a hidden root itself nor a folder above the temporary folder: the scratch folders, slot locks and
    other evaluations' files live there and must stay hidden.
    """

    project = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    wanted = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), project,
              *site.getsitepackages(), *(p for p in sys.path[1:] if p and os.path.isabs(p))}
    if site.ENABLE_USER_SITE:
        wanted.add(site.getusersitepackages())
    roots = hidden_roots()
    guarded = [os.path.realpath(tempfile.gettempdir()), *roots]
    out: list[str] = []
    for p in sorted({os.path.realpath(w) for w in wanted if w}):
        if not any(p.startswith(r + os.sep) for r in roots) or not os.path.exists(p):
            continue
        if any(g == p or g.startswith(p + os.sep) for g in guarded):
            continue
        p = p if os.path.isdir(p) else os.path.dirname(p)  # a zip on sys.path: its folder
        if not any(p == q or p.startswith(q + os.sep) for q in out):
            out = [q for q in out if not q.startswith(p + os.sep)] + [p]
    return out


def _dir_chain(path: str, home: str) -> list[str]:
    """`--perms 0755 --dir D` for each folder between a tmpfs root and `path`, so the uid can traverse them."""
    args: list[str] = []
    parts = Path(path).relative_to(home).parts[:-1]
    cur = home
    for part in parts:
        cur = os.path.join(cur, part)
        args += ["--perms", "0755", "--dir", cur]
    return args


def tmpfs_size_args(tmpfs_mb: int) -> list[str]:
    """bubblewrap's `--size` for the next `--tmpfs` (none for 0: unbounded, only where a caller asks for it)."""
    return ["--size", str(tmpfs_mb << 20)] if tmpfs_mb > 0 else []


def bwrap_argv(spec: Any, uid: int, env: dict[str, str]) -> list[str]:
    """The bubblewrap command line for `spec` (a `sandbox.ChildSpec`; see `kernelbench.harness.isolation.sandbox`'s
    docstring for what each part is for)."""
    home = os.path.realpath(os.path.expanduser("~"))
    argv = [find_bwrap(), "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--ro-bind", "/", "/"]
    # every tmpfs has a size: its pages are host memory that RLIMIT_AS never sees (the child's cgroup charges
    # them too, `kernelbench.harness.isolation.cgroups`); a full one is ENOSPC, the candidate's fault
    size = tmpfs_size_args(spec.limits.tmpfs_mb)
    if home not in ("/", "/tmp") and os.path.isdir(home):
        argv += ["--perms", "0755", *size, "--tmpfs", home]
    # a private, writable /dev/shm: LLVM's OpenMP runtime (clang -fopenmp builds) registers itself there and
    # aborts without it ("OMP: Error #179 ... SHM2"); bubblewrap's own /dev is root's
    argv += ["--perms", "1777", *size, "--tmpfs", "/tmp", "--dev", "/dev", "--perms", "1777", *size, "--tmpfs",
             "/dev/shm", "--proc", "/proc"]
    if os.path.isdir(CGROUP_ROOT):  # other children's cgroups: hidden (`CGROUP_ROOT`)
        argv += ["--perms", "0555", "--size", "4096", "--tmpfs", CGROUP_ROOT]
    roots = hidden_roots()
    for p in child_readonly_paths():  # the interpreter and the project, wherever they live (after both tmpfs)
        root = next(r for r in roots if p.startswith(r + os.sep))
        argv += _dir_chain(p, root) + ["--ro-bind", p, p]
    if spec.cuda:
        for node in sorted(Path("/dev").glob("nvidia*")):
            argv += ["--dev-bind", str(node), str(node)]
    tmpfs_roots = [r for r in (home, "/tmp") if r not in ("/",)]
    for src, dest, flag in [(spec.scratch_dir, spec.scratch_dir, "--bind")] + [
            (b.src, b.dest or b.src, "--bind" if b.writable else "--ro-bind") for b in spec.binds]:
        root = next((r for r in tmpfs_roots if dest.startswith(r + os.sep)), "")
        if root:  # folders bubblewrap creates on a tmpfs are root-only unless made 0755 here
            argv += _dir_chain(dest, root)
        argv += [flag, src, dest]
    argv += ["--chdir", spec.scratch_dir, "--clearenv"]
    for k, v in env.items():
        argv += ["--setenv", k, v]
    if uid >= 0:
        argv += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                 "--bounding-set=-all"]
    return argv + list(spec.argv)
