#!/usr/bin/env bash
# The GPU check: everything that needs a CUDA GPU, in one call, with a short table printed last.
#   bash scripts/gpu_check.sh            # on a machine with a CUDA GPU (an H200 here)
#   GPU_CHECK_DRY_RUN=1 bash scripts/gpu_check.sh   # anywhere: print each step's command, run none
# It runs from the source tree with the machine's own torch (no install, no network): the project's pins
# do not apply there. Logs and JSON figures go to $OUT (or ./gpu-check-out).
# Pure-Python wheels the GPU machine lacks (TRL; accelerate, peft if absent) travel in wheels/: fetch them
# here first with `bash scripts/fetch_gpu_wheels.sh` (needs PyPI) and carry wheels/ along; each one whose
# package does not import there is unpacked under $OUT/pydeps, which goes on PYTHONPATH.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export KERNEL_AGENT_CACHE=${KERNEL_AGENT_CACHE:-/tmp/kernel-agent-cache}
export MAX_JOBS=${MAX_JOBS:-4}
BUDGET_S=${GPU_CHECK_BUDGET_S:-500}     # stay inside one device call
PYDEPS="$OUT/pydeps"; mkdir -p "$PYDEPS"
for whl in wheels/*.whl; do
  [ -f "$whl" ] || continue
  pkg=$(basename "$whl" | cut -d- -f1)
  python3 -c "import $pkg" 2>/dev/null || python3 -m zipfile -e "$whl" "$PYDEPS"
done
export PYTHONPATH=$PYTHONPATH:$PYDEPS
start=$(date +%s)
left() { echo $(( BUDGET_S - ($(date +%s) - start) )); }
declare -a ROWS

step() {  # step NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); (( t > l )) && t=$l
  if (( t < 20 )); then ROWS+=("$name|skipped (time)|0"); return; fi
  if [ -n "${GPU_CHECK_DRY_RUN:-}" ]; then echo "[dry run] $name (${t}s): $*"; ROWS+=("$name|dry run|0"); return; fi
  local s=$(date +%s)
  timeout -k 10 "$t" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  local dt=$(( $(date +%s) - s ))
  local tail1; tail1=$(grep -E "passed|failed|error|SUMMARY" "$OUT/$name.log" | tail -1 | cut -c1-70)
  ROWS+=("$name|rc=$rc ${tail1}|${dt}s")
}

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
  command -v bwrap || echo "no bwrap: sandbox falls back to rlimits"; nvcc --version | tail -1; } >"$OUT/env.log" 2>&1
# The harness judges only in a cgroup per child (docs/harness.md, "Cgroups"); a machine where none can be made
# runs marked (EvalResult.limits_held names what held) instead of every evaluation being a harness_error.
if ! python3 -c "from kernelbench.harness import cgroups; cgroups.create(1 << 30, 64).remove()" >>"$OUT/env.log" 2>&1; then
  export KERNEL_AGENT_ALLOW_MISSING_CGROUPS=1
  echo "no per-child cgroups here: running with KERNEL_AGENT_ALLOW_MISSING_CGROUPS=1 (results carry limits_held)" >>"$OUT/env.log"
fi
cat "$OUT/env.log"

# pytest-xdist spreads the gpu tests over 8 workers when the machine has it (its image does): each test is a
# cold nvcc build of about half a minute, 46 of them in a row would not fit one device call.
XDIST=(); python3 -c "import xdist" 2>/dev/null && XDIST=(-n 8)
# Most useful first: a later step gets what time is left and is skipped under 20 s. The reference solutions'
# tests (32 cold nvcc builds) run in their own step after the harness's own gpu tests and the benchmark.
# -v: each test's outcome is logged as it finishes, so a run cut short by the budget still says which passed
SOLUTIONS=tests/test_reference_solutions.py
step gpu_tests       180 python3 -m pytest -v -p no:cacheprovider -m gpu -o addopts="" --timeout=170 "${XDIST[@]}" -rf \
  --ignore=$SOLUTIONS tests/
# on a GPU the group figure is 16 cold nvcc builds first: the benchmark's group figure is a CPU one
step harness_bench   130 python3 scripts/bench_harness.py --device cuda --repeats 8 --group 0
step solutions       170 python3 -m pytest -v -p no:cacheprovider -m gpu -o addopts="" --timeout=160 "${XDIST[@]}" -rf $SOLUTIONS
step grpo_trainer    100 python3 scripts/gpu_grpo_check.py "$OUT/grpo"
step ncu_profile      60 python3 scripts/ncu_check.py   # --profile ncu: Nsight Compute counters of one CUDA kernel
step task_sizes      120 python3 scripts/task_sizes.py --size gpu --device cuda --json "$OUT/task_sizes.json"
echo
for f in gpu_tests harness_bench solutions grpo_trainer ncu_profile task_sizes; do
  [ -f "$OUT/$f.log" ] && { echo "== $f (last lines)"; tail -n 15 "$OUT/$f.log"; }
done
echo
printf '%-16s | %-72s | %s\n' step result time
for r in "${ROWS[@]}"; do IFS='|' read -r a b c <<<"$r"; printf '%-16s | %-72s | %s\n' "$a" "$b" "$c"; done
