"""The policy backends by name: `--backend hf | vllm | openai` -> a `Policy`.

A module of its own because the backends import `agent.policy` (its types), so the factory that imports
the backends cannot live there without an import circle.
"""

from __future__ import annotations

from typing import Any, get_args, Literal

from agent.hf_backend import HFPolicy
from agent.openai_backend import OpenAIPolicy
from agent.policy import Policy
from agent.vllm_backend import VLLMPolicy

Backend = Literal["hf", "vllm", "openai"]
BACKENDS = get_args(Backend)


def make_policy(backend: str, model: str, *, base_url: str = "", device: str = "cpu",
                **options: Any) -> Policy:
    """Build the backend named by `--backend`; heavy imports happen only for the chosen one."""
    if backend == "openai":
        if not base_url:
            raise ValueError("the openai backend needs --base-url (e.g. http://localhost:8000/v1)")
        return OpenAIPolicy(base_url=base_url, model=model, **options)
    if backend == "hf":
        return HFPolicy.from_pretrained(model, device=device, **options)
    if backend == "vllm":
        return VLLMPolicy(model, **options)
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
