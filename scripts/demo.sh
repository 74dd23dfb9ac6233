#!/usr/bin/env bash
# scripts/demo.sh [OUT]   — the cpu-tiny end to end on a CPU: SFT warm start -> multi-turn RL with the real
# harness -> held-out bench -> OUT/report.md (default OUT: runs/cpu-tiny). Same as:
#   python3 -m cli.main train --preset cpu-tiny --pipeline --out OUT   (= kernel-agent train ...)
set -euo pipefail
OUT="${1:-runs/cpu-tiny}"
cd "$(dirname "$0")/.."
bash scripts/install.sh   # a fresh machine: bubblewrap, the project and its pinned dependencies
exec python3 -m cli.main train --preset cpu-tiny --pipeline --out "$OUT"
