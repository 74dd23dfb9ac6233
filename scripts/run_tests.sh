#!/usr/bin/env bash
# Installs the project and runs the CPU test suite (the README's test command; .ci/run calls it).
# The 25 slowest tests are listed last: the suite must stay under 20 minutes on 2 cores.
#   bash scripts/run_tests.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec python3 -m pytest -q -p no:cacheprovider --durations=25 "$@"
