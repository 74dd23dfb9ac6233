"""Which code ran (`code_sampler`, `code_attribution`, `code_check`) on real processes, and the run child's
refusal of new executable memory (`spawn_guard.EXEC_MEMORY_RULES`).

The candidate's side of the attack (a BLAS found without importing it) is `tests/adversarial/cpp_found_blas.py`
in `test_adversarial.py`'s table; here the parts are tested one by one, with real compiles and real
sampled processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import replace

import pytest

from kernelbench.harness import code_attribution, code_check, code_sampler, compute_code, protocol
from kernelbench.harness.child import build_manifest
from kernelbench.harness.isolation import cgroups
from kernelbench.harness.config import EvalConfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
needs_perf = pytest.mark.skipif(os.geteuid() != 0 or not cgroups._mounts()[1],
                                reason="cgroup-mode perf_event_open needs root and a cgroup v2 hierarchy")

LOOP_C = "double spin(long n) { double s = 0; for (long i = 0; i < n; ++i) s += (double)i * 1e-9; return s; }\n"
WORKER = textwrap.dedent("""
    import ctypes, json, sys, time
    import torch
    torch.set_num_threads(1)
    lib = ctypes.CDLL(sys.argv[1]); lib.spin.restype = ctypes.c_double; lib.spin.argtypes = [ctypes.c_long]
    a = torch.randn(256, 256)
    windows = []
    start = time.monotonic_ns()
    while time.monotonic_ns() - start < 400_000_000:
        lib.spin(2_000_000)                     # the candidate's own code
    windows.append((start, time.monotonic_ns()))
    start = time.monotonic_ns()
    while time.monotonic_ns() - start < 400_000_000:
        a @ a                                   # MKL inside libtorch_cpu
    windows.append((start, time.monotonic_ns()))
    time.sleep(0.3)                             # alive for a snapshot of the mappings after both
    print(json.dumps(windows))
""")


def _built_library(tmp_path) -> tuple[str, str, dict]:
    ext = tmp_path / "ext"
    (ext / "kern").mkdir(parents=True)
    (ext / "kern" / "kern.c").write_text(LOOP_C)
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(ext / "kern" / "kern.so"), str(ext / "kern" / "kern.c")],
                   check=True)
    return str(ext), str(ext / "kern" / "kern.so"), build_manifest.record(str(ext))


@needs_perf
def test_samples_are_attributed_to_the_objects_that_ran(tmp_path):
    """A real process in a real cgroup: the window spent in a library from the build is the candidate's, the
    window spent in torch's matmul is foreign (libtorch_cpu), whatever either is called."""
    ext, lib, manifest = _built_library(tmp_path)
    check = code_check.CodeCheck(EvalConfig(), ext, manifest)
    cg = cgroups.create(4 << 30, 256)  # the child's own cgroup, as `sandbox.start_child` makes it
    try:
        check.attach(cg.v2_dir)
        argv = cg.shim_argv() + [sys.executable, "-c", WORKER, lib]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
        windows = [tuple(w) for w in json.loads(out.stdout.strip().splitlines()[-1])]
        check.stop()
        sampled = check.sampled
        assert sampled is not None and sampled.lost_records == 0
        own = code_attribution.attribute(sampled, windows[:1], ext, manifest)
        blas = code_attribution.attribute(sampled, windows[1:], ext, manifest)
    finally:
        check.close()
        cg.remove()
    assert own.in_calls >= code_attribution.MIN_SAMPLES and blas.in_calls >= code_attribution.MIN_SAMPLES
    assert own.candidate / own.in_calls > 0.8 and own.foreign_share < 0.1, own.summary()
    assert blas.foreign_share > 0.8 and blas.foreign_objects[0][0].startswith("libtorch_cpu"), blas.summary()
    assert code_attribution.judge(blas, "strict") and not code_attribution.judge(blas, "partial")
    assert not code_attribution.judge(own, "strict")
    # the same bytes under another manifest (a library the compile stage did not record) are not the candidate's
    other = code_attribution.attribute(sampled, windows[:1], ext, {"kern": {"kern.so": "0" * 64}})
    assert other.candidate == 0 and other.foreign_share > 0.8, other.summary()


OPS_WORKER = textwrap.dedent("""
    import json, threading, time
    import torch
    from kernelbench.harness.child.call_checks import CallTracer
    torch.set_num_threads(1)
    big, a = torch.empty(1 << 22), torch.randn(768, 768)  # long matmuls: that thread mostly inside MKL
    tracer, stop = CallTracer(), threading.Event()

    def other():
        while not stop.is_set():
            a @ a                               # another thread: not traced, no op window

    t = threading.Thread(target=other)
    t.start()
    start = time.monotonic_ns()
    with tracer:
        while time.monotonic_ns() - start < 600_000_000:
            big.fill_(1.0)                      # the calling thread inside an allowed op
    end = time.monotonic_ns()
    stop.set()
    t.join()
    time.sleep(0.3)
    print(json.dumps({"window": [start, end], "ops": tracer.windows}))
""")


@needs_perf
def test_allowed_op_time_is_charged_to_the_op_on_the_calling_thread_only(tmp_path):
    """Samples of the traced thread inside a dispatched op are PyTorch's (`torch_op`); a matmul another thread
    runs during the same windows stays foreign: the op windows are per thread, matched through the pid."""
    check = code_check.CodeCheck(EvalConfig(), str(tmp_path), {})
    cg = cgroups.create(4 << 30, 256)
    try:
        check.attach(cg.v2_dir)
        argv = cg.shim_argv() + [sys.executable, "-c", OPS_WORKER]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": REPO})
        got = json.loads(out.stdout.strip().splitlines()[-1])
        check.stop()
        sampled = check.sampled
        assert sampled is not None
        shares = code_attribution.attribute(sampled, [tuple(got["window"])], str(tmp_path), {},
                                            [tuple(w) for w in got["ops"]])
        without = code_attribution.attribute(sampled, [tuple(got["window"])], str(tmp_path), {})
    finally:
        check.close()
        cg.remove()
    assert len(got["ops"]) > 10 and shares.in_calls >= code_attribution.MIN_SAMPLES
    assert shares.torch_op / shares.in_calls > 0.2, shares.summary()
    assert shares.foreign / shares.in_calls > 0.15 and shares.foreign_objects[0][0].startswith("libtorch_cpu"), \
        shares.summary()
    assert without.torch_op == 0 and without.foreign == shares.foreign + shares.torch_op, without.summary()
    assert code_attribution.judge(shares, "strict")  # the other thread's matmul


@pytest.mark.parametrize("candidate,torch_op,foreign,flagged", [
    (60, 35, 5, False),   # a kernel that zero-fills and copies for layout
    (15, 80, 5, True),    # most of the time inside allowed ops: more than a fill can honestly take
    (80, 0, 20, True),    # foreign code alone
    (95, 0, 5, False),
])
def test_time_outside_the_candidates_code_is_bounded(candidate, torch_op, foreign, flagged):
    shares = code_attribution.CodeShares(in_calls=candidate + torch_op + foreign, candidate=candidate, runtime=0,
                                         foreign=foreign, foreign_objects=(("libtorch_cpu.so", foreign),),
                                         runtime_objects=(), lost_records=0, total_samples=100, torch_op=torch_op)
    assert bool(code_attribution.judge(shares, "strict")) is flagged
    assert not code_attribution.judge(shares, "partial")


def test_samples_of_a_process_never_snapshotted_after_its_first_call_are_not_foreign(tmp_path):
    """A process whose whole run fell between two reads of its mappings (a loaded machine): its samples are
    counted as unattributed, never as foreign code, and the check says it did not hold (a harness error, or
    `unsampled` where allowed) instead of rejecting the candidate."""
    in_window = [(7, 7, 1_000 + i, 0x1000 + i) for i in range(30)]
    early = code_sampler.MapsSnapshot(7, 10, 20, ((0x1000, 0x2000, "/lib/libc.so.6"),))  # before the first call
    sampled = code_sampler.Sampled(tuple(in_window), 0, (early,), code_sampler.DEFAULT_PERIOD_NS, {})
    shares = code_attribution.attribute(sampled, [(900, 2_000)], str(tmp_path), {})
    assert (shares.in_calls, shares.foreign, shares.unattributed) == (0, 0, 30), shares
    covered = code_sampler.MapsSnapshot(7, 10, 1_500, early.regions)  # read again after the first call
    shares = code_attribution.attribute(replace(sampled, maps=(covered,)), [(900, 2_000)], str(tmp_path), {})
    assert (shares.in_calls, shares.runtime, shares.unattributed) == (30, 30, 0), shares
    for config, allowed in ((EvalConfig(), False), (EvalConfig(allow_unsampled=True), True)):
        check = code_check.CodeCheck(config, str(tmp_path), {})
        check.sampled = sampled
        refusal = protocol.TaskRefusal(rlimit=True, seccomp=True, refused=True, exec_memory=True)
        result = replace(_result(refusal), call_windows_ns=((900, 2_000),))
        if allowed:
            assert set(check.judge(result, "strict", True)) == {code_check.UNSAMPLED}
        else:
            with pytest.raises(code_check.CodeCheckUnavailable, match="mappings were not read"):
                check.judge(result, "strict", True)


def test_missing_sampler_fails_closed(tmp_path):
    """No cgroup v2 (or no perf_event_open): the evaluation cannot run, unless `allow_unsampled`, where the
    result says the check did not hold."""
    with pytest.raises(code_check.CodeCheckUnavailable):
        code_check.CodeCheck(EvalConfig(), str(tmp_path), {}).attach("")  # the child got no v2 cgroup
    with pytest.raises(code_check.CodeCheckUnavailable):  # a folder perf cannot open events on
        code_check.CodeCheck(EvalConfig(), str(tmp_path), {}).attach(str(tmp_path / "none"))
    for allowing in (EvalConfig(allow_unsampled=True), EvalConfig(allow_missing_cgroups=True)):
        code_check.CodeCheck(allowing, str(tmp_path), {}).attach("")  # a machine marked as without them
    check = code_check.CodeCheck(EvalConfig(allow_unsampled=True), str(tmp_path), {})
    check.attach("")
    refusal = protocol.TaskRefusal(rlimit=True, seccomp=True, refused=True, exec_memory=True)
    result = _result(refusal)
    assert set(check.judge(result, "strict", True)) == {code_check.UNSAMPLED}
    check.close()


@needs_perf
def test_guard_not_taken_fails_closed(tmp_path):
    """A run child whose refusal of executable memory did not take is not judged as if it had."""
    check = code_check.CodeCheck(EvalConfig(), str(tmp_path), {})
    cg = cgroups.create(4 << 30, 256)
    try:
        check.attach(cg.v2_dir)
        refusal = protocol.TaskRefusal(rlimit=True, seccomp=True, refused=True, exec_memory=False)
        with pytest.raises(code_check.CodeCheckUnavailable):
            check.judge(_result(refusal), "strict", True)
    finally:
        check.close()
        cg.remove()


def _result(refusal: protocol.TaskRefusal) -> protocol.RunResult:
    return protocol.RunResult(structures=(), output_meta=[], ops=(), kernel_calls=1, timer_patched=(),
                              harness_tampered=(), threads_before=1, threads_after=1, os_threads_before=1,
                              os_threads_after=1, new_tasks_refused=refusal, checks_installed=(), timing=None,
                              timing_blocks=None, call_windows_ns=((1, 2),))


EXEC_PROBE = textwrap.dedent("""
    import ctypes, mmap, os, json
    import torch
    from kernelbench.harness.child import spawn_guard
    torch.relu(torch.randn(1 << 20)).sum()           # the OpenMP team starts before the guard, as in the run child
    seen = spawn_guard.refuse_new_tasks(exec_memory=True)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    def errno_of(ok):
        return 0 if ok else ctypes.get_errno()
    rw = libc.mmap(None, 4096, 3, 0x22, -1, 0)
    seen["mmap_rw"] = errno_of(rw not in (None, 2**64 - 1))
    seen["mmap_exec"] = errno_of(libc.mmap(None, 4096, 5, 0x22, -1, 0) not in (None, 2**64 - 1))
    seen["mprotect_exec"] = errno_of(libc.mprotect(ctypes.c_void_p(rw), 4096, 5) == 0)
    seen["mremap"] = errno_of(libc.syscall(25, ctypes.c_void_p(rw), 4096, 8192, 1) not in (-1,))
    try:
        os.execv("/bin/true", ["true"])
    except OSError as e:
        seen["execve"] = e.errno
    x = torch.randn(1 << 20)                         # honest work after the guard: torch, OpenMP, big reallocs
    seen["torch"] = float(torch.relu(x).sum() >= 0)
    libc.malloc.restype = libc.realloc.restype = ctypes.c_void_p
    seen["realloc"] = float(bool(libc.realloc(ctypes.c_void_p(libc.malloc(1 << 22)), 1 << 25)))
    print(json.dumps(seen))
""")


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the seccomp filter is x86-64 only")
def test_no_new_executable_memory_after_the_guard():
    """After the guard: no PROT_EXEC mapping or mprotect, no mremap, no execve (EPERM); torch and glibc's
    realloc (which falls back from mremap to copying) still work."""
    out = subprocess.run([sys.executable, "-c", EXEC_PROBE], capture_output=True, text=True, timeout=120, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": REPO})
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    eperm = 1
    assert seen["exec_memory"] and seen["seccomp"], seen
    assert seen["mmap_rw"] == 0 and seen["torch"] == 1.0 and seen["realloc"] == 1.0, seen
    assert seen["mmap_exec"] == seen["mprotect_exec"] == seen["mremap"] == seen["execve"] == eperm, seen


def test_sampler_fails_closed_without_a_cgroup(tmp_path):
    with pytest.raises(code_sampler.SamplerUnavailable):
        code_sampler.CodeSampler(str(tmp_path / "missing"))


def test_an_allowed_op_holds_no_more_than_its_datas_time(tmp_path):
    """Samples in libtorch_cpu inside an allowed op's window are PyTorch's only up to what the bytes the op wrote
    take at a floor bandwidth: `set_` writes none, so a matmul run from a storage deleter freed inside it
    (`tests/adversarial/deleter_in_allowed_op.py`) is foreign past 20 us an op, pooled (split over many `set_`
    calls it earns no more); a fill of 8 MB may take tens of milliseconds."""
    period = code_sampler.DEFAULT_PERIOD_NS
    snap = code_sampler.MapsSnapshot(7, 10, 5_000_000_000, ((0x1000, 0x9000, "/opt/torch/lib/libtorch_cpu.so"),))
    samples = tuple((7, 7, 1_000_000 + i * period, 0x1000 + i) for i in range(40))  # 20 ms of the main thread
    sampled = code_sampler.Sampled(samples, 0, (snap,), period, {}, {7: 1})
    window = [(0, 100_000_000)]
    span = (1_000_000 - 1, 1_000_000 + 40 * period)
    set_ = code_attribution.attribute(sampled, window, str(tmp_path), {}, [(1, *span, 0)])
    fill = code_attribution.attribute(sampled, window, str(tmp_path), {}, [(1, *span, 8 << 20)])
    assert code_attribution.no_data_budget_samples(1, period) == 1
    assert (set_.torch_op, set_.foreign) == (1, 39), set_.summary()
    many = [(1, 1_000_000 - 1 + i * period, 1_000_000 + (i + 1) * period - 2, 0) for i in range(40)]
    split = code_attribution.attribute(sampled, window, str(tmp_path), {}, many)  # one sample in each of 40 `set_`
    assert (split.torch_op, split.foreign) == (2, 38), split.summary()  # 40 x 20 us: two periods, pooled
    assert "past its data's time" in set_.foreign_objects[0][0]
    assert (fill.torch_op, fill.foreign) == (40, 0), fill.summary()
    assert set_.foreign_share > code_attribution.FOREIGN_SHARE_MAX and fill.foreign == 0


def test_the_timed_calls_are_judged_by_themselves(tmp_path):
    """Foreign code in the timed calls alone, diluted under the limit by the candidate's own work in untimed
    calls (`tests/adversarial/found_blas_padded.py`): pooled it passes, the calls inside the paired blocks fail."""
    snap = code_sampler.MapsSnapshot(7, 10, 10_000, ((0x1000, 0x2000, "/opt/torch/lib/libtorch_cpu.so"),
                                                     (0x5000, 0x6000, str(tmp_path / "kern" / "kern.so"))))
    own = [(7, 7, 100 + i, 0x5000) for i in range(400)]      # correctness calls: the candidate's spin
    blas = [(7, 7, 2_000 + i, 0x1000) for i in range(30)]    # timed calls: MKL
    sampled = code_sampler.Sampled(tuple(own + blas), 0, (snap,), code_sampler.DEFAULT_PERIOD_NS,
                                   {(7, 0x5000, 0x6000): "a" * 64})
    manifest = {"kern": {"kern.so": "a" * 64}}
    windows = ((50, 600), (1_990, 2_100))
    check = code_check.CodeCheck(EvalConfig(), str(tmp_path), manifest)
    check.sampled = sampled
    refusal = protocol.TaskRefusal(rlimit=True, seccomp=True, refused=True, exec_memory=True)
    result = replace(_result(refusal), call_windows_ns=windows)
    assert check.judge(result, "strict", True) == {}
    found = check.judge(result, "strict", True, ((1_900, 2_200),))
    assert set(found) == {code_attribution.FLAG} and found[code_attribution.FLAG].startswith("the timed calls"), found
    assert code_attribution.within(list(windows), ((1_900, 2_200),)) == [(1_990, 2_100)]


def test_the_parent_hashes_a_bounded_amount_of_the_build(tmp_path, monkeypatch):
    """Each process's mapping of a build file is hashed on its own (a forked copy may have rewritten its text), so
    a large library mapped by many forked processes would keep the parent hashing: past `DIGEST_MAX_BYTES` a
    process counts as one whose mappings cannot be read (`flooded_pids`: `dynamic:mapping_flood` under strict)."""
    import mmap

    lib = tmp_path / "kern" / "kern.so"
    lib.parent.mkdir()
    lib.write_bytes(b"\x7fELF" + bytes(3 * mmap.PAGESIZE))
    with open(lib, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ), \
            mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ):  # two mappings of one file: hashed once each
        ranges = [[int(x, 16) for x in line.split()[0].split("-")] for line in open("/proc/self/maps")
                  if line.rstrip().endswith(str(lib))]
        assert len(ranges) == 2, ranges
        sampler = object.__new__(code_sampler.CodeSampler)
        sampler.digest_under, sampler._digests = str(tmp_path) + "/", {}
        sampler._flooded, sampler._hashed_bytes = set(), 0
        (lo, hi), (lo2, hi2) = ranges
        sampler._digest_new(os.getpid(), ((lo, hi, str(lib)),))
        assert len(sampler._digests[(os.getpid(), lo, hi)]) == 64 and not sampler._flooded
        monkeypatch.setattr(code_sampler, "DIGEST_MAX_BYTES", lib.stat().st_size + 10)
        sampler._digest_new(os.getpid(), ((lo2, hi2, str(lib)),))
    assert sampler._flooded == {os.getpid()} and sampler._digests[(os.getpid(), lo2, hi2)] == ""


def test_the_candidates_code_between_its_calls_is_rejected(tmp_path):
    """An op observer or an allocator's deleter runs the candidate's code inside the harness's own work between
    calls (writing the next inputs, holding a check's copy), where no trial is timed: L1/10_sum_dim was `correct`
    at 8.7-9.6x so. Samples of the candidate's library between its first and last call windows reject, whatever
    installed the hook; a few (a destructor) do not, nor do samples before the first call (import, `__init__`)."""
    lib = str(tmp_path / "kern" / "kern.so")
    snap = code_sampler.MapsSnapshot(7, 10, 10_000, ((0x5000, 0x6000, lib), (0x1000, 0x2000, "/usr/lib/libc.so.6")))
    windows = [(100, 200), (300, 400)]
    inside = [(7, 7, 150 + i, 0x5000) for i in range(20)]
    def sampled(outside: list) -> code_sampler.Sampled:
        return code_sampler.Sampled(tuple(inside + outside), 0, (snap,), code_sampler.DEFAULT_PERIOD_NS,
                                    {(7, 0x5000, 0x6000): "a" * 64})
    manifest = {"kern": {"kern.so": "a" * 64}}
    hook = [(7, 7, 210 + i, 0x5000) for i in range(10)]       # between the two calls, in the candidate's code
    harness = [(7, 7, 210 + i, 0x1000) for i in range(10)]    # between the calls, in libc: the harness's work
    before = [(7, 7, 50 + i, 0x5000) for i in range(10)]      # before the first call: __init__
    few = hook[:code_attribution.BETWEEN_MIN_SAMPLES - 1]                # a destructor's moment
    found = code_attribution.between_calls(sampled(hook), windows, str(tmp_path), manifest)
    assert found == code_attribution.BetweenCalls(10, 20, 0)
    assert set(code_attribution.judge_between(found)) == {code_attribution.BETWEEN_FLAG}
    for quiet in (harness, before, few):
        out = code_attribution.between_calls(sampled(quiet), windows, str(tmp_path), manifest)
        assert code_attribution.judge_between(out) == {}, out
    # foreign code outside torch's, numpy's and the interpreter's folders (another BLAS) or anonymous memory
    # between the calls is counted with the compute routines; numpy's generator (the harness's inputs) is not, nor
    # libffi, through which ctypes calls glibc for the inputs' levels (honest solutions were rejected by its samples)
    numpy_dir = next(d for d in compute_code.harness_dirs() if d.endswith("numpy"))
    libffi = sorted(compute_code.harness_files())
    assert libffi, "libffi is not mapped in this process"
    for path, counted in (("/usr/lib/x86_64-linux-gnu/libopenblas.so.0", True), ("", True), (libffi[0], False),
                          (os.path.join(numpy_dir, "random", "_pcg64.cpython-311-x86_64-linux-gnu.so"), False)):
        other = code_sampler.MapsSnapshot(7, 10, 10_000, snap.regions + ((0x9000, 0xA000, path),))
        found = code_attribution.between_calls(
            code_sampler.Sampled(tuple(inside + [(7, 7, 210 + i, 0x9000) for i in range(10)]), 0, (other,),
                                 code_sampler.DEFAULT_PERIOD_NS, {(7, 0x5000, 0x6000): "a" * 64}),
            windows, str(tmp_path), manifest)
        assert found.compute_outside == (10 if counted else 0), (path, found)
        if counted:  # the rejection names where the samples fell
            name = path or "<anonymous>"
            assert found.compute_objects == ((name, 10),), found
            assert f"({name} 10)" in code_attribution.judge_between(found)[code_attribution.BETWEEN_FLAG]


def test_the_interpreters_extension_modules_are_the_harness_s_in_a_virtual_environment(tmp_path):
    """In a virtual environment `sysconfig`'s `platstdlib` names the environment's prefix, which holds no
    `lib-dynload`; the harness's `ctypes` calls between calls run in `_ctypes` from the base interpreter's, and
    counting them as foreign code rejected about half of the honest evaluations there. `harness_dirs` must name
    the folder this interpreter loads them from, in a real environment made here (this interpreter's packages
    seen through `--system-site-packages`)."""
    import venv

    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(tmp_path / "env")
    probe = textwrap.dedent("""
        import importlib.util, os, sys
        from kernelbench.harness import compute_code
        assert sys.prefix != sys.base_prefix, "not a virtual environment"
        ext = os.path.dirname(os.path.realpath(importlib.util.find_spec("_ctypes").origin))
        assert ext in compute_code.harness_dirs(), (ext, compute_code.harness_dirs())
        assert compute_code.harness_object(os.path.realpath(importlib.util.find_spec("_json").origin))
        print("ok")
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([str(tmp_path / "env" / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=root), timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def _torch_cpu_symbol(pattern: str) -> tuple[str, int, int]:
    """(name, link address, size) of the first sized text symbol of libtorch_cpu whose name matches `pattern`."""
    lib = os.path.join(compute_code.torch_lib_dir(), "libtorch_cpu.so")
    out = subprocess.run(["nm", "--defined-only", "-S", "-p", lib], capture_output=True, text=True, check=True).stdout
    rx = re.compile(pattern)
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tT" and int(parts[1], 16) >= 16 and rx.search(parts[3]):
            return parts[3], int(parts[0], 16), int(parts[1], 16)
    raise AssertionError(f"no symbol of libtorch_cpu matches {pattern}")


def test_compute_routines_in_torch_are_located_by_its_symbol_table(tmp_path):
    """MKL's GEMM is linked into libtorch_cpu, and a hook found in its dynamic symbol table (not imported) can run
    it between the candidate's calls or inside an allowed op. `compute_code` places libtorch_cpu's compute
    routines by its static symbol table and each mapping's file offset: MKL's samples between the calls reject
    (`dynamic:work_between_calls`) and inside an allowed copy are never the copy's; a copy kernel's samples are
    neither. The placement goes by the mapping's offset, so a library whose first pages lost the execute right
    (a mapping that starts later) is read the same."""
    assert compute_code.symbol_table_present(), "libtorch_cpu's symbol table is needed for this check"
    lib = os.path.join(compute_code.torch_lib_dir(), "libtorch_cpu.so")
    vaddr, offset = compute_code.exec_segment(lib)
    gemm_name, gemm, _ = _torch_cpu_symbol(r"^mkl_blas_.*sgemm")
    copy_name, copy, _ = _torch_cpu_symbol(r"copy_kernel")
    assert compute_code.COMPUTE_SYMBOLS.match(gemm_name) and not compute_code.COMPUTE_SYMBOLS.match(copy_name)
    for skip in (0, 0x10000):  # the whole segment mapped, or its first pages no longer executable
        lo = 0x7F0000000000 + skip
        hi = 0x7F0000000000 + (1 << 31)
        snap = code_sampler.MapsSnapshot(7, 10, 10_000, ((lo, hi, lib),))
        offsets = {(7, lo, hi): offset + skip}
        at_gemm, at_copy = lo - skip + gemm - vaddr + 8, lo - skip + copy - vaddr + 8
        windows = [(100, 200), (300, 400)]
        inside = [(7, 7, 150 + i, at_copy) for i in range(20)]
        hook = [(7, 7, 210 + i, at_gemm) for i in range(10)]
        harness = [(7, 7, 210 + i, at_copy) for i in range(10)]
        found = code_attribution.between_calls(_sampled_at(snap, inside + hook, offsets), windows, str(tmp_path), {})
        assert found == code_attribution.BetweenCalls(0, 0, 10, ((lib, 10),)), (skip, found)
        assert "compute routine" in code_attribution.judge_between(found)[code_attribution.BETWEEN_FLAG]
        quiet = code_attribution.between_calls(_sampled_at(snap, inside + harness, offsets), windows, str(tmp_path), {})
        assert code_attribution.judge_between(quiet) == {}, quiet
        # inside an allowed copy's window that wrote 8 MiB (budget: 69 samples): MKL stays foreign, a copy does not
        op = [(1, 100, 200, 8 << 20)]
        in_op = [(7, 7, 150 + i, at_gemm) for i in range(20)]
        shares = code_attribution.attribute(_sampled_at(snap, in_op, offsets), [(100, 200)], str(tmp_path),
                                            {}, op)
        assert shares.foreign == 20 and shares.torch_op == 0, shares
        shares = code_attribution.attribute(_sampled_at(snap, inside, offsets), [(100, 200)], str(tmp_path),
                                            {}, op)
        assert shares.torch_op == 20 and shares.foreign == 0, shares


def _sampled_at(snap: code_sampler.MapsSnapshot, samples: list, offsets: dict) -> code_sampler.Sampled:
    return code_sampler.Sampled(tuple(samples), 0, (snap,), code_sampler.DEFAULT_PERIOD_NS, {}, {7: 1}, offsets=offsets)


def test_a_symbol_table_nm_cannot_read_is_an_error_not_an_empty_one(tmp_path):
    """`compute_code` reads torch's symbol tables with `nm`: a file without symbols has no compute routines, but a
    failing `nm` must not read as that (the check between calls would quietly lose its compute routines)."""
    not_elf = tmp_path / "libtorch_cpu.so"
    not_elf.write_text("not an object file\n")
    with pytest.raises(RuntimeError, match="nm could not read"):
        compute_code._read_symbols(str(not_elf))
    assert compute_code._read_symbols("/bin/true") == []  # stripped: "no symbols", an empty table
