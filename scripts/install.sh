#!/usr/bin/env bash
# Installs what kernel-agent needs on a fresh Debian machine: bubblewrap (the harness's sandbox), clang
# with libomp (faster CPU builds), chromium (the viewer's browser test), the project with its pinned
# dependencies, and the dev tools. Safe to run again.
#   bash scripts/install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
  else
    echo "install.sh: bubblewrap missing and cannot be installed here; the harness will fall back to rlimits" >&2
  fi
fi
# clang and LLVM's OpenMP runtime: CPU candidates then compile in about half the time (kernelbench/harness/build/toolchain.py
# `clang_cxx`); without them gcc builds everything, so a failure here is only a warning
if ! command -v clang++ >/dev/null 2>&1 || ! dpkg -s libomp-dev >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libomp-dev >/dev/null; } \
      || echo "install.sh: clang/libomp-dev could not be installed; CPU builds will use gcc (slower)" >&2
  else
    echo "install.sh: clang or libomp-dev missing; CPU builds will use gcc (slower)" >&2
  fi
fi
# Chromium renders `kernel-agent view` pages in the browser test (tests/test_view.py); without it that
# test is skipped, so a failure here is only a warning
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
      || echo "install.sh: chromium could not be installed; the browser test of kernel-agent view will be skipped" >&2
  else
    echo "install.sh: chromium missing; the browser test of kernel-agent view will be skipped" >&2
  fi
fi
python3 -m pip install -q --disable-pip-version-check -e '.[dev]' -c constraints/cpu.txt
