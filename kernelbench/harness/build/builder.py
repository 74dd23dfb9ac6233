"""The builder: the compile stage imports a candidate in a sandboxed child that builds its cache entry.

Compiling a candidate means importing it in a sandboxed child whose `TORCH_EXTENSIONS_DIR` is the cache
entry (`kernelbench.harness.build.build_cache`): `load_inline` builds there. The run child later imports the
candidate again with a private copy of the entry mounted at the same path (`run_binds`; ninja's commands name
absolute paths, so the path must not move), finds the built library, and loads it without running ninja
(`build_manifest`: only what the parent recorded after the compile stage, file for file; any other build
request there is refused). Compile errors are cached too, per file. The build folder the child wrote is
brought back with `kernelbench.harness.build.build_tree`, never followed.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kernelbench.harness import protocol
from kernelbench.harness.build import nvrtc, prebuild, triton_kernels
from kernelbench.harness.child import build_flags, report
from kernelbench.harness.isolation import sandbox
from kernelbench.harness.build.build_cache import cache_key, cache_root, source_key
from kernelbench.harness.build.build_tree import (TREE_TOO_LARGE, BuildTreeError, TreeTooLarge, import_tree, remove_tree,
                                           swap_in)
from kernelbench.harness.build.cache_quota import USE_LOCK, evict_builds, mark_used, record_size
from kernelbench.harness.child import launch, prebuild as child_prebuild
from kernelbench.harness.config import EvalConfig
from kernelbench.harness.build.pch import pch_dir_for, pch_flags
from kernelbench.harness.build.toolchain import cuda_arch_list, extract_error_lines

@dataclass(frozen=True)
class BuildOutcome:
    """Result of the compile stage for one candidate."""

    status: str
    """`ok`, `compile_error`, `format_error` (no ModelNew class after import), `timeout`, `harness_error`
    (the compile child never reached the candidate's code; not cached), or `rejected` (`flag` says why)."""
    cached: bool
    """Served from the build cache (no compiler ran)."""
    compile_s: float
    """Wall time of this stage (lookup only, when cached)."""
    error_text: str
    """Trimmed compiler / import error lines for the feedback; empty when ok."""
    entry_dir: str
    """The cache entry folder; its `ext/` subfolder is TORCH_EXTENSIONS_DIR for both children."""
    sandbox: str = ""
    pch_dir: str = ""
    """The PCH folder the build used; the run child's load_inline must pass the same include path."""
    flag: str = ""
    """Why a `rejected` build is: `dynamic:harness_tampered` (the child's report pipe carried frames of the
    candidate's own; not cached), `dynamic:build_flags` (the child refused a `load_inline` / `load` call's
    flags; not cached) or `build:tree_too_large` (its build folder is over `build_tree.BUILD_BOUNDS`; cached
    per file)."""


def _read_meta(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def build(src: str, config: EvalConfig, jobs: int = 0, pch_dir: str = "") -> BuildOutcome:
    """Compile `src` (import it in a sandboxed child) unless the cache holds the result already.

    The entry (`cache_key`) holds the built extensions; the outcome of importing THIS file is recorded per
    whole-file hash inside it (`imports/`), since Python-side faults (an exit at import, no ModelNew) differ
    between files that share a build. A new file on a built entry still gets its import child, which finds
    the extension up to date (no compiler runs: `cached`)."""
    start = time.perf_counter()
    root = cache_root(config)
    key = cache_key(src, config.device)
    entry = root / key
    meta_path = entry / "imports" / f"{source_key(src, config.device)}.json"
    with open(root / f"{key}{USE_LOCK}", "a") as use:  # not the compile's lock: a hit never waits on a compile
        fcntl.flock(use, fcntl.LOCK_SH)  # held while marking the use: eviction re-checks it under LOCK_EX
        mark_used(entry)
        meta = _read_meta(meta_path)
    if meta is None:
        with open(root / f"{key}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another worker compiling the same entry: wait and reuse
            meta = _read_meta(meta_path)
            if meta is None:
                built = (entry / "built").exists()
                if not built:  # whatever a killed or failed compile left here is not trusted: build afresh
                    remove_tree(entry / "ext")
                pch_dir = pch_dir_for(pch_dir, pch_flags(src), config.device)
                meta = _compile(src, config, entry, jobs, pch_dir)
                if meta["status"] in ("ok", "compile_error", "format_error") or meta.get("flag") == TREE_TOO_LARGE:
                    meta_path.parent.mkdir(parents=True, exist_ok=True)
                    tmp = meta_path.with_suffix(f".tmp{os.getpid()}")
                    tmp.write_text(json.dumps(meta))
                    os.replace(tmp, meta_path)  # atomic: a killed harness leaves no half-written verdict
                if meta["status"] == "ok":
                    (entry / "built").touch()  # last: the entry's completion marker
                mark_used(entry)
                if not built:
                    evict_builds(root, keep=key)  # the cache's quota (cache_quota), never this entry
                return BuildOutcome(status=meta["status"], cached=built and meta["status"] == "ok",
                                    compile_s=time.perf_counter() - start, error_text=meta["error_text"],
                                    entry_dir=str(entry), sandbox=meta["sandbox"], pch_dir=meta["pch_dir"],
                                    flag=meta.get("flag", ""))
    return BuildOutcome(status=meta["status"], cached=True, compile_s=time.perf_counter() - start,
                        error_text=meta["error_text"], entry_dir=str(entry), sandbox=meta.get("sandbox", ""),
                        pch_dir=meta.get("pch_dir", ""), flag=meta.get("flag", ""))


COMPILE_REPORT_BYTES = 4 << 20
"""Most bytes the compile child's report pipe may carry (its import error is bounded: worker.MAX_ERROR_CHARS)."""


def _compile(src: str, config: EvalConfig, entry: Path, jobs: int, pch_dir: str) -> dict:
    """Run the compile child on a private copy of the entry's build folder, mounted at the entry's path
    (bubblewrap) or, in the plain child, the entry's own folder handed to its uid; then bring back its
    regular files into a fresh folder owned by the parent (`import_tree`) and swap that in.

    The child's outcome comes over the parent's pipe (`kernelbench.harness.child.report`), read once every process of the
    sandbox is dead, and must echo this job's nonce: the child imports the candidate, whose code (a thread,
    an `atexit` handler, a C++ static destructor) could rewrite a result file in its scratch folder after
    the harness wrote it. Code of the candidate can still write frames of its own into the pipe before the
    report (the run child's limit, docs/harness.md); a forged `ok` wins nothing: the run child imports the
    file again and every verdict comes from there."""
    ext = entry / "ext"
    ext.mkdir(parents=True, exist_ok=True)
    fresh = str(entry / f"ext.new-{os.getpid()}-{secrets.token_hex(4)}")
    oversized = too_large = ""
    with sandbox.SlotLease() as slot:
        scratch = sandbox.make_scratch(slot.uid, prefix="ka-compile-")
        private = tempfile.mkdtemp(prefix="ka-build-")
        collector = report.Collector(COMPILE_REPORT_BYTES)
        try:
            if sandbox.sandbox_kind(config.require_sandbox) == sandbox.BWRAP:
                work = os.path.join(private, "ext")
                import_tree(str(ext), work)  # what earlier builds left, so a built entry is found up to date
                build_bind = sandbox.Bind(work, str(ext), writable=True)
            else:  # no mount namespace: the child writes at the entry's path, which is then treated as hostile
                work = str(ext)
                build_bind = sandbox.Bind(work, writable=True)
            sandbox.give_tree(work, slot.uid)
            nonce = secrets.token_hex(16)
            job = protocol.CompileJob(nonce=nonce, device=config.device, candidate="candidate.py", pch_dir=pch_dir,
                                      report_fd=collector.write_fd)
            Path(scratch, "candidate.py").write_text(src)
            Path(scratch, "job.json").write_text(json.dumps(protocol.job_to_dict(job)))
            env = child_env(config, str(ext), jobs)
            early = prebuild.plan(src, pch_dir, str(ext), env) if config.device == "cpu" else None
            if early is not None:  # ninja starts before the child imports torch (`kernelbench.harness.build.prebuild`)
                Path(scratch, child_prebuild.PLAN_FILE).write_text(json.dumps(early))
            spec = sandbox.ChildSpec(
                argv=launch.child_argv(scratch, prebuild=True), scratch_dir=scratch, cuda=config.device == "cuda",
                worker=sandbox.WorkerEntry(scratch, prebuild=True) if config.warm_workers else None,
                limits=child_limits(config, config.compile_timeout_s),  # as the run child's
                binds=(build_bind,) + ((sandbox.Bind(pch_dir),) if pch_dir else ()),
                env=env, pass_fds=(collector.write_fd,))
            child = sandbox.start_child(spec, slot, config.require_sandbox)
            collector.started()
            out = child.wait()  # returns once every process of the sandbox (and the slot's uid) is dead
            frames = collector.finish()
            tampered = frames.report_only_problem()
            result = protocol.decode_untrusted(protocol.CompileReport, frames.result(), nonce)
            try:  # bounded (build_tree.BUILD_BOUNDS) before any tool runs on the folder
                record_size(entry, import_tree(work, fresh))
                swap_in(entry, fresh)
            except TreeTooLarge as e:
                too_large = f"the build folder is over the harness's bounds: {e}"
            except (OSError, BuildTreeError) as e:
                oversized = f"the build folder could not be brought back: {e}"
            if too_large or oversized:
                remove_tree(fresh)
                if work == str(ext):  # the plain child built in place: none of it is kept
                    remove_tree(ext)
        finally:
            collector.close()
            remove_tree(scratch)  # trees the candidate wrote: iterative, never following a link
            remove_tree(private)
    meta = {"status": "ok", "error_text": "", "sandbox": out.sandbox, "pch_dir": pch_dir}
    if not out.untrusted_ran:  # the child never reached the candidate: the harness's fault, never cached
        state = "timed out" if out.timed_out else f"exit {out.returncode}"
        where = "could not start" if not out.started else "failed in the harness's own code before the candidate ran"
        meta.update(status="harness_error", error_text=f"the compile child {where} ({state}, {out.sandbox}): "
                    f"{out.stderr_tail.strip()[-600:]}")
    elif out.timed_out:
        meta.update(status="timeout", error_text=f"compile stage exceeded {config.compile_timeout_s:.0f} s")
    elif too_large:  # the candidate's own build: its verdict, before any tool reads the folder
        meta.update(status="rejected", flag=TREE_TOO_LARGE, error_text=too_large)
    elif oversized:
        meta.update(status="compile_error", error_text=oversized)
    elif tampered:  # bytes nobody but the candidate's code could have written: judged as the run child's are
        meta.update(status="rejected", flag="dynamic:harness_tampered",
                    error_text=f"the compile child's report channel carried {tampered}")
    elif result is not None and result.fault is None:
        return meta
    elif result is not None and result.fault.phase == "build_flags":  # the child's hook refused a call's flags
        meta.update(status="rejected", flag=build_flags.FLAG, error_text=result.fault.error[:2000])
    elif result is not None and result.fault.phase == "format":
        meta.update(status="format_error", error_text=result.fault.error[:2000])
    else:
        text = "\n".join([result.fault.error if result else "", out.stdout_tail, out.stderr_tail])
        if result is None:
            limit = f" at its memory limit ({out.memory_peak_bytes >> 20} MiB)" if out.oom_kills else ""
            text = f"the compile child died{limit} (exit {out.returncode}, signal {out.signal}) without a result\n" + text
        meta.update(status="compile_error", error_text=extract_error_lines(text))
    return meta


def child_limits(config: EvalConfig, timeout_s: float, max_file_mb: int = 0) -> sandbox.Limits:
    """The limits of every child of an evaluation (compile, reference, run): address space on CPU only (the
    CUDA driver maps huge ranges); the cgroup's memory and pids and a bounded tmpfs everywhere (DESIGN.md
    rule 9). The compile child had no memory limit at all: a 12 GiB allocation at import went through."""
    return sandbox.Limits(timeout_s=timeout_s, max_processes=config.max_processes,
                          max_file_mb=max(config.max_file_mb, max_file_mb),
                          memory_limit_mb=config.memory_limit_mb if config.device == "cpu" else 0,
                          cgroup_memory_mb=config.cgroup_memory_mb, tmpfs_mb=config.tmpfs_mb,
                          allow_missing_cgroups=config.allow_missing_cgroups)


HEAP_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=68719476736"
"""glibc's malloc for the CPU children: allocations below 32 MiB (the most glibc allows for this threshold) come
from the heap, and freed heap memory stays with the process (64 GiB trim threshold): an output allocated and
freed on every call reuses the same pages instead of faulting fresh ones in."""


def cpu_allocator_env(config: EvalConfig) -> tuple[tuple[str, str], ...]:
    """CPU: every child's allocations of 2 MB or more start on a page and are marked for transparent huge pages
    (`THP_MEM_ALLOC_ENABLE=1`: c10's CPU allocator page-aligns them and madvises MADV_HUGEPAGE;
    c10/core/impl/alloc_cpu.cpp), and glibc keeps the memory of those below 32 MiB for reuse (`HEAP_TUNABLES`).

    Why page-aligned: without it a memory-bound kernel's speed depended on where its process's buffers landed,
    which differs between the reference's child and the candidate's and between evaluations. Measured on a
    2-core VM with an 8 MB ReLU against `torch.relu` (`scripts/bench_harness.py`): the speedup moved between
    0.85x and 1.85x over 8 evaluations (CV 14-24 %), while the same two kernels alternating in one process
    agreed to 1-4 %; page-aligned in both children, 0.86-1.07x (CV 3.4-6.8 %).

    Why the heap tunables: a page-aligned request asks glibc for the size plus the alignment, which is never
    below glibc's own adaptive mmap threshold (raised to a freed chunk's size), so every such allocation was a
    fresh mmap and every timed call that allocated its output paid page faults for it: ~900 faults per 8 MB
    ReLU call, a block median of 4.1 ms against 1.5 ms for the same call without them, and which side paid
    followed each process's allocation history (with no hidden checks, the reference's calls faulted and the
    candidate's did not: a 2.7x speedup from nothing). With them the timed calls fault none, and the per-round
    spread of the paired log ratio fell from 0.23-0.31 to 0.13. Not `mmap_max=0` (never mmap): a heap that cannot
    unmap fragmented to 5-7x the live size with 64 MB buffers. docs/harness.md "Measured"."""
    if config.device != "cpu":
        return ()
    return ("THP_MEM_ALLOC_ENABLE", "1"), ("GLIBC_TUNABLES", HEAP_TUNABLES)


def child_env(config: EvalConfig, extensions_dir: str, jobs: int = 0) -> tuple[tuple[str, str], ...]:
    # KMP_BLOCKTIME=0: libomp's (clang's OpenMP) workers otherwise spin for 200 ms after every parallel
    # region; that spinning is runnable time no trial accounts for, and paired timing's unaccounted-time rule
    # (paired.busiest_thread_s) read it as hidden work, rejecting an honest clang `-fopenmp` kernel as
    # `timing_inconsistent` (tests/test_builds.py). 0: they sleep at once, as libgomp's (torch's) do soon.
    env = [("TORCH_EXTENSIONS_DIR", extensions_dir), ("OMP_NUM_THREADS", str(config.threads)),
           ("KMP_BLOCKTIME", "0"), ("MAX_JOBS", str(jobs or max(1, (os.cpu_count() or 2) // 2)))]
    if config.device == "cuda" and cuda_arch_list():
        env.append(("TORCH_CUDA_ARCH_LIST", cuda_arch_list()))
    return tuple(env) + cpu_allocator_env(config) + nvrtc.child_env(config.device) + triton_kernels.child_env(config.device, extensions_dir)


def run_binds(entry_dir: str, scratch: str, uid: int, kind: str, pch_dir: str = "") -> tuple[sandbox.Bind, ...]:
    """The run child's view of the build: a private writable copy mounted at the entry's path (bubblewrap),
    or the entry itself handed to the run uid (plain child: no mount namespace to relocate a copy); plus the
    PCH folder the build used, read-only, so the run child's view of the build's include paths is the
    compile child's."""
    ext = os.path.join(entry_dir, "ext")
    pch = (sandbox.Bind(pch_dir),) if pch_dir and os.path.isdir(pch_dir) else ()
    if kind != sandbox.BWRAP:
        sandbox.give_tree(ext, uid)
        return (sandbox.Bind(ext, writable=True),) + pch  # not mounted: tells run_child which paths the uid needs
    copy = os.path.join(scratch, "ext")
    # mtimes kept, so ninja finds the build up to date; torch's build baton (`NAME/lock`) stays behind: a
    # copy taken while another import holds it, or left by a killed compile, would make the run child's
    # load_inline wait on it until the run stage's timeout; links and special files stay behind too
    import_tree(ext, copy)
    sandbox.give_tree(copy, uid)
    return (sandbox.Bind(copy, ext, writable=True),) + pch


