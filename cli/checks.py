"""Checks the commands make before any work: inputs that must fail early with one clear line, and the
harness preflight (kernelbench.executors.preflight). Each raises `UsageError` (exit 2) or `ServerError` (exit 3)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

from cli.main import UsageError

# Imports inside functions: each command loads what it needs when it runs: `kernel-agent --help`, a mistyped flag
# and `kernel-agent tasks` answer without torch.


class ServerError(Exception):
    """The model server cannot be used (unreachable, unknown model): one line, exit 3."""


def positive(value: int | None, flag: str) -> None:
    """`flag` given with a value below 1 (a count that must be at least 1)."""
    if value is not None and value < 1:
        raise UsageError(f"{flag} must be at least 1, got {value}")


def out_folder(path: str | None, flag: str = "--out") -> None:
    """An output folder: refused when it names an existing file (before any work, not after it)."""
    if path and os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{flag} {path} is an existing file, not a folder")


def input_file(path: str, flag: str) -> None:
    if not os.path.exists(path):
        raise UsageError(f"{flag} {path}: file not found")
    if not os.path.isfile(path):
        raise UsageError(f"{flag} {path}: not a file")


def text_file(path: str, flag: str) -> str:
    """The text of a file that must be UTF-8 text (a binary file is refused by name)."""
    input_file(path, flag)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except UnicodeDecodeError:
        raise UsageError(f"{flag} {path}: not a text file (expected a Python source file)") from None
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot read: {e.strerror}") from None


def language(device_name: str, name: str | None) -> None:
    """`--language` that the device cannot run (`cuda` kernels on cpu, `cpp` kernels on cuda)."""
    from agent.prompts import language_of

    try:
        language_of(device_name, name or "")
    except ValueError as e:
        raise UsageError(f"--language: {e}") from None


def device(name: str, *, compile_only_hint: bool = False) -> None:
    """`cuda` needs a GPU torch can see: checked up front, before any model or harness work."""
    if name != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        hint = " (use --compile-only to check CUDA sources without one)" if compile_only_hint else \
            " (use --device cpu on this machine)"
        raise UsageError(f"--device cuda needs a CUDA GPU, and torch sees none here{hint}")


def torch_device(args) -> None:
    """`--threads` (at least 1) applied to torch, and `--device` resolved (CUDA where there is one) and checked:
    for the commands that run the user's own model in this process (`hotspots`, `apply`)."""
    if args.threads < 1:
        raise UsageError("--threads must be at least 1")
    import torch

    torch.set_num_threads(args.threads)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device(args.device)


def size_for(device_name: str, size: str | None) -> None:
    if device_name == "cpu" and size == "gpu":
        raise UsageError("--size gpu builds GPU-sized inputs (gigabytes; minutes per trial on a CPU): use --size cpu "
                         "with --device cpu")


def base_url(url: str) -> None:
    if url and not url.startswith(("http://", "https://")):
        raise UsageError(f"--base-url {url!r} must start with http:// or https:// (e.g. http://localhost:8000/v1)")


def model_server(url: str, model: str, timeout_s: float = 10.0) -> None:
    """Reach the chat-completions server's `/models` and find `model` there (when it lists models), so a
    closed port or a wrong name fails before baselines or preflight, not after them."""
    base_url(url)
    req = urllib.request.Request(url.rstrip("/") + "/models", headers={"Accept": "application/json"})
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read(1 << 20)
    except urllib.error.HTTPError as e:
        if e.code in (400, 404, 405, 501):  # a server without the listing: the first request will tell
            return
        raise ServerError(f"{url}/models answered HTTP {e.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise ServerError(f"cannot reach {url}: {getattr(e, 'reason', e)}") from None
    try:
        ids = [m.get("id") for m in json.loads(body).get("data", [])]
    except (ValueError, AttributeError):
        return
    if model and ids and model not in ids:
        raise ServerError(f"{url} does not serve model {model!r} (it serves: {', '.join(map(str, ids[:8]))})")


def run_preflight(eval_config, executor, say=None) -> None:
    """The harness preflight (`kernelbench.executors.preflight`) with the run's `EvalConfig` and `ExecutorConfig`;
    `PreflightFailed` reaches `cli.main` (exit 4)."""
    from kernelbench.executors.preflight import preflight

    preflight(eval_config, executor=executor.kind, ray_address=executor.ray_address, say=say)
