#!/usr/bin/env bash
# Fetch the pure-Python wheels scripts/gpu_check.sh brings to a GPU machine without network (TRL and the
# Hugging Face libraries it needs at the versions pinned here) into wheels/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p wheels
for spec in "trl==1.16.0" "accelerate==$(python3 -c 'import accelerate;print(accelerate.__version__)')" \
            "peft==$(python3 -c 'import peft;print(peft.__version__)')"; do
  pip download "$spec" --no-deps --only-binary=:all: -d wheels/ -q
done
ls wheels/
