#!/usr/bin/env bash
# The GPU check: everything that needs a CUDA GPU, in one call, with a short table printed last.
#   bash scripts/gpu_check.sh            # on a machine with a CUDA GPU (an H200 here)
# It runs from the source tree with the machine's own torch (no install, no network): the project's pins
# do not apply there. Logs and JSON figures go to $OUT (or ./gpu-check-out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-check-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export KERNEL_AGENT_CACHE=${KERNEL_AGENT_CACHE:-/tmp/kernel-agent-cache}
export MAX_JOBS=${MAX_JOBS:-4}
BUDGET_S=${GPU_CHECK_BUDGET_S:-500}     # stay inside one device call
start=$(date +%s)
left() { echo $(( BUDGET_S - ($(date +%s) - start) )); }
declare -a ROWS

step() {  # step NAME TIMEOUT_S CMD...
  local name=$1 t=$2; shift 2
  local l; l=$(left); (( t > l )) && t=$l
  if (( t < 20 )); then ROWS+=("$name|skipped (time)|0"); return; fi
  local s=$(date +%s)
  timeout -k 10 "$t" "$@" >"$OUT/$name.log" 2>&1; local rc=$?
  local dt=$(( $(date +%s) - s ))
  local tail1; tail1=$(grep -E "passed|failed|error|SUMMARY" "$OUT/$name.log" | tail -1 | cut -c1-70)
  ROWS+=("$name|rc=$rc ${tail1}|${dt}s")
}

{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
  command -v bwrap || echo "no bwrap: sandbox falls back to rlimits"; nvcc --version | tail -1; } >"$OUT/env.log" 2>&1
cat "$OUT/env.log"

step gpu_tests       300 python3 -m pytest -q -p no:cacheprovider -m gpu -o addopts="" --timeout=280 tests/
step cuda_solutions  240 python3 scripts/check_solutions.py --device cuda --size gpu --checker harness
step harness_bench   120 python3 scripts/bench_harness.py --device cuda --repeats 5 --batch 4
step task_sizes      120 python3 scripts/task_sizes.py --size gpu --device cuda --json "$OUT/task_sizes.json"

echo
for f in gpu_tests cuda_solutions harness_bench task_sizes; do
  [ -f "$OUT/$f.log" ] && { echo "== $f (last lines)"; tail -n 15 "$OUT/$f.log"; }
done
echo
printf '%-16s | %-72s | %s\n' step result time
for r in "${ROWS[@]}"; do IFS='|' read -r a b c <<<"$r"; printf '%-16s | %-72s | %s\n' "$a" "$b" "$c"; done
