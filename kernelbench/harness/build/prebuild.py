"""The parent's side of the compile child's early build (`kernelbench.harness.child.prebuild`): predict the
two files torch's `load_inline` will write for a candidate, so that ninja can start before the child has
imported torch.

Measured on a 2-core VM (`scripts/bench_harness.py`): the cold compile stage of a small C++ op was the child's
`import torch` (2.3-3.8 s) followed by clang with its PCH (12.5-15.5 s), while the second core waited; with
the early build the two overlap.

The prediction (`plan`) covers the common form only: exactly one compile call in the file, a `load_inline`
whose arguments are literals (`build_cache.compiled_parts`), with `name`, `cpp_sources`, `functions` (a list of
names), `extra_cflags` (exactly the flags of the clang PCH the build uses) and `verbose`, on the CPU. Its
`build.ninja` comes from a template (`template`) that a trusted probe recorded once per PCH folder: the probe
runs torch's own `load_inline`, through the same hook, in a sandboxed child with the compile child's
environment, on a fixed source, with ninja and the import switched off; the template is that file with the
probe's folder, name and flags marked. `main.cpp` is written here as torch assembles it (the header, the
sources, the bindings), and the probe checks that assembly against torch's on the probe's own call: when
they differ the template is refused and nothing is planned. A prediction is never trusted for a verdict:
torch's ninja in the child decides whether anything is left to build (see the child module).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from kernelbench.harness.build.build_cache import build_code_hash, compiled_parts, toolchain_fingerprint
from kernelbench.harness.build.build_tree import BuildTreeError, copy_regular, remove_tree
from kernelbench.harness.child import launch, load_inline_hook
from kernelbench.harness.child.load_inline_hook import clang_pch_info, normal_flags, STANDARD_CFLAGS
from kernelbench.harness.isolation import sandbox

# Imports inside functions: torch.utils.cpp_extension (0.16 s to import) loads only when a build needs it: a warm
# `kernel-agent eval` pays every import.

TEMPLATE_FILE = "prebuild-template-{}.json"
"""Named by `template_key`: the build code's hash (`build_cache.build_code_hash`: this module, the hook, the
builder...) and the environment's (`build_cache.toolchain_fingerprint`). A template recorded by other build
code, or by an interpreter whose torch lives elsewhere, would predict files torch no longer writes, and
every cold compile would then build twice."""
PROBE_NAME = "kaprobe7b2e41"
PROBE_SOURCE = "int kaprobe7b2e41_fn(int x) { return x + 1; }"
PROBE_FUNCTION = "kaprobe7b2e41_fn"
MARK_DIR, MARK_NAME, MARK_FLAGS = "\x00DIR\x00", "\x00NAME\x00", "\x00FLAGS\x00"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FLAG = re.compile(r"-[A-Za-z0-9_=.,+-]+")
KEYS = {"name", "cpp_sources", "functions", "extra_cflags", "verbose"}
_WARNED: set[str] = set()


def main_cpp(cpp_sources: list[str], functions: list[str] | None) -> str:
    """`main.cpp` as `load_inline` assembles it (torch.utils.cpp_extension): torch's header, the sources,
    and, for `functions`, a pybind11 module binding each through `torch::wrap_pybind_function`; lines joined
    with newlines. Checked against torch's own on every new template (`_probe`)."""
    lines = ["#include <torch/extension.h>", *cpp_sources]
    if functions is not None:
        lines += ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",
                  *[f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");' for f in functions], "}"]
    return "\n".join(lines)


def template_key() -> str:
    """What a template is a function of besides its PCH folder: the build code and the CPU build environment
    (interpreter, torch's paths, compiler), the same parts as a build entry's key."""
    text = build_code_hash() + "\n" + toolchain_fingerprint("cpu")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def template(pch_dir: str, env: tuple[tuple[str, str], ...]) -> str | None:
    """The `build.ninja` template of clang builds with the PCH in `pch_dir` (recorded now if missing), or None
    when there is no clang PCH there or the probe could not record one (then nothing is planned: a cold
    compile is as slow as before, never wrong). `env`: the compile child's (`builder.child_env`)."""
    info = clang_pch_info(pch_dir) if pch_dir else None
    if info is None:
        return None
    path = Path(pch_dir, TEMPLATE_FILE.format(template_key()))
    if not path.exists():
        with open(Path(pch_dir).parent / "build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.exists():
                recorded = _probe(pch_dir, info["flags"], env)
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_text(json.dumps(recorded))
                os.chmod(tmp, 0o644)
                os.replace(tmp, path)
    try:
        recorded = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not recorded.get("ninja"):
        if pch_dir not in _WARNED:  # slower cold compiles, never a wrong one: said once per process
            _WARNED.add(pch_dir)
            print(f"kernel-agent: no early builds with the PCH in {pch_dir}: {recorded.get('why', '?')} "
                  f"(delete {path} to record the template again)", file=sys.stderr)
        return None
    return str(recorded["ninja"])


def _probe(pch_dir: str, flags: tuple[str, ...], env: tuple[tuple[str, str], ...]) -> dict:
    """Run torch's `load_inline` on the probe source in a sandboxed child (trusted code only), with the
    compile child's environment and hook; returns {"ninja": template} or {"ninja": "", "why": ...}."""
    with sandbox.SlotLease() as slot:
        scratch = sandbox.make_scratch(slot.uid, prefix="ka-probe-")
        try:
            ext = os.path.join(scratch, "ext")
            boot = (f"import sys; sys.path.insert(0, {launch.PROJECT_ROOT!r}); "
                    f"from kernelbench.harness.build.prebuild import probe_child; probe_child({pch_dir!r}, {list(flags)!r}, "
                    f"{scratch!r})")
            spec = sandbox.ChildSpec(argv=(sys.executable, "-I", "-c", boot), scratch_dir=scratch,
                                     limits=sandbox.Limits(timeout_s=300, max_processes=64),
                                     binds=(sandbox.Bind(pch_dir),),
                                     env=tuple((k, ext if k == "TORCH_EXTENSIONS_DIR" else v) for k, v in env))
            out = sandbox.run_child(spec, slot)
            with tempfile.TemporaryDirectory() as own:
                try:
                    copy_regular(scratch, "probe.json", os.path.join(own, "probe.json"), 4 << 20)
                    seen = json.loads(Path(own, "probe.json").read_text())
                except (OSError, ValueError, BuildTreeError):
                    return {"ninja": "", "why": f"the probe wrote no result (exit {out.returncode}): "
                                                f"{out.stderr_tail.strip()[-400:]}"}
        finally:
            remove_tree(scratch)
    folder = os.path.join(ext, PROBE_NAME)
    if seen.get("main_cpp") != main_cpp([PROBE_SOURCE], [PROBE_FUNCTION]):
        return {"ninja": "", "why": "torch assembles main.cpp differently from `main_cpp`"}
    ninja, marked = str(seen.get("ninja", "")), " ".join([*flags, "-include-pch", os.path.join(pch_dir, "extension.pch")])
    if ninja.count(marked) != 1:
        return {"ninja": "", "why": "the build's flags are not where the template expects them"}
    ninja = ninja.replace(marked, MARK_FLAGS).replace(folder, MARK_DIR).replace(PROBE_NAME, MARK_NAME)
    if PROBE_NAME in ninja or scratch in ninja:
        return {"ninja": "", "why": "the probe's folder or name remains in the template"}
    return {"ninja": ninja}


def probe_child(pch_dir: str, flags: list[str], scratch: str) -> None:
    """In the probe's sandboxed child: torch's `load_inline` through the compile child's hook, with ninja and
    the library's import switched off; writes what it wrote to `probe.json`."""
    from torch.utils import cpp_extension

    cpp_extension._run_ninja_build = lambda *a, **k: None
    cpp_extension._import_module_from_library = lambda *a, **k: None
    load_inline_hook.patch_load_inline("cpu", pch_dir)
    cpp_extension.load_inline(name=PROBE_NAME, cpp_sources=PROBE_SOURCE, functions=[PROBE_FUNCTION],
                              extra_cflags=list(flags))
    folder = Path(os.environ["TORCH_EXTENSIONS_DIR"], PROBE_NAME)
    Path(scratch, "probe.json").write_text(json.dumps({"main_cpp": (folder / "main.cpp").read_text(),
                                                       "ninja": (folder / "build.ninja").read_text()}))


def plan(src: str, pch_dir: str, ext_dir: str, env: tuple[tuple[str, str], ...]) -> dict | None:
    """The early build of `src` for the compile child (`prebuild.json`): the build folder under `ext_dir` (the
    child's TORCH_EXTENSIONS_DIR) and its two files; None when the file is not in the form this predicts.
    `env`: the compile child's environment (`builder.child_env`; its MAX_JOBS is ninja's `-j`)."""
    parts = compiled_parts(src)
    if parts is None:
        return None
    calls = json.loads(parts)
    if len(calls) != 1 or calls[0][0] != "load_inline":
        return None
    _, args, kwargs = calls[0]
    if len(args) > 2 or set(kwargs) - KEYS:
        return None
    call = {**dict(zip(("name", "cpp_sources"), args)), **kwargs}
    name, sources, functions = call.get("name"), call.get("cpp_sources"), call.get("functions")
    flags = STANDARD_CFLAGS if call.get("extra_cflags") is None else call["extra_cflags"]
    sources = [sources] if isinstance(sources, str) else sources
    functions = [functions] if isinstance(functions, str) else functions
    if not (isinstance(name, str) and IDENTIFIER.fullmatch(name) and isinstance(sources, list)
            and all(isinstance(s, str) for s in sources) and isinstance(flags, (list, tuple))
            and all(isinstance(f, str) and FLAG.fullmatch(f) for f in flags)
            and (functions is None or (isinstance(functions, list)
                                       and all(isinstance(f, str) and IDENTIFIER.fullmatch(f) for f in functions)))):
        return None
    info = clang_pch_info(pch_dir) if pch_dir else None
    if info is None or normal_flags(flags) != info["flags"]:
        return None  # another compiler or PCH builds it: not what the template recorded
    ninja = template(pch_dir, env)
    if ninja is None:
        return None
    folder = os.path.join(ext_dir, name)
    marked = " ".join([*flags, "-include-pch", info["pch"]])
    return {"dir": folder, "jobs": dict(env).get("MAX_JOBS", ""),
            "files": {"main.cpp": main_cpp(sources, functions),
                      "build.ninja": ninja.replace(MARK_FLAGS, marked).replace(MARK_DIR, folder).replace(MARK_NAME, name)}}
