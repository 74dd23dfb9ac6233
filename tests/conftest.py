"""Shared fixtures. Tests run on CPU by default; `gpu` tests run through scripts/gpu_check.sh."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config, items):
    has_cuda = False
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        pass
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def build_cache_dir(tmp_path_factory) -> str:
    """One build cache for the whole test session, so each extension compiles once per run."""
    path = os.environ.get("KERNEL_AGENT_TEST_CACHE") or str(tmp_path_factory.mktemp("builds"))
    os.makedirs(path, exist_ok=True)
    return path
