"""A submodule call in the task format's terms: its arguments as a flat list of tensors plus a template.

KernelBench's `forward(*inputs)` takes tensors; a submodule of a real model is called with keyword arguments,
tuples of tensors (`position_embeddings=(cos, sin)`) and settings (`use_cache=False`). The template records the
call's shape with every tensor replaced by its index in the flat list, so that the extracted `Model`, and the
`ModelNew` swapped back into the user's model (`agent.swap`), convert between the two without loss. Values the
format cannot carry (a cache object, a config) make the submodule unextractable, with that reason.

Template leaves: `{"t": i}` (tensor i of the flat list), `{"c": value}` (None, bool, int, float or str);
nodes: `{"tuple": [...]}`, `{"list": [...]}`. The whole call: `{"args": [...], "kwargs": {name: leaf or node}}`.
"""

from __future__ import annotations

from typing import Any

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

CONSTANTS = (type(None), bool, int, float, str)


class Unextractable(ValueError):
    """Why a submodule cannot become a task file (one line)."""


def make_template(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    """(template, flat tensors) of one call; raises Unextractable for a value the format cannot carry."""
    import torch

    tensors: list[Any] = []

    def walk(value: Any, where: str) -> dict[str, Any]:
        if isinstance(value, torch.Tensor):
            if type(value) is not torch.Tensor:
                raise Unextractable(f"argument {where} is a {type(value).__name__} (a tensor subclass)")
            tensors.append(value)
            return {"t": len(tensors) - 1}
        if isinstance(value, CONSTANTS):
            return {"c": value}
        if type(value) in (tuple, list):
            return {type(value).__name__: [walk(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        raise Unextractable(f"argument {where} is a {type(value).__name__}: the task format passes tensors and "
                            f"plain constants only")

    template = {"args": [walk(a, str(i)) for i, a in enumerate(args)],
                "kwargs": {k: walk(v, k) for k, v in kwargs.items()}}
    return template, tensors


def fill(template: dict[str, Any], tensors: tuple[Any, ...] | list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """(args, kwargs) of the call `template` describes, with `tensors` in place of the flat list."""

    def build(node: dict[str, Any]) -> Any:
        if "t" in node:
            return tensors[node["t"]]
        if "c" in node:
            return node["c"]
        if "tuple" in node:
            return tuple(build(n) for n in node["tuple"])
        return [build(n) for n in node["list"]]

    return [build(n) for n in template["args"]], {k: build(n) for k, n in template["kwargs"].items()}


def flatten_call(template: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The flat tensors of a new call of the same shape as `template`'s; raises ValueError naming the first
    argument that differs in shape or in a constant (the swapped-in kernel was extracted for one call shape)."""
    import torch

    found: list[Any] = []

    def walk(node: dict[str, Any], value: Any, where: str) -> None:
        if "t" in node:
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"argument {where}: expected a tensor, got {type(value).__name__}")
            found.append(value)
        elif "c" in node:
            if not (type(value) is type(node["c"]) and value == node["c"]):
                raise ValueError(f"argument {where}: the kernel was extracted for {node['c']!r}, called with {value!r}")
        else:
            kind, items = next(iter(node.items()))
            if type(value).__name__ != kind or len(value) != len(items):
                raise ValueError(f"argument {where}: expected a {kind} of {len(items)}, got {type(value).__name__}")
            for i, (n, v) in enumerate(zip(items, value)):
                walk(n, v, f"{where}[{i}]")

    if len(args) != len(template["args"]) or set(kwargs) != set(template["kwargs"]):
        raise ValueError(f"the kernel was extracted for a call with {len(template['args'])} positional argument(s) "
                         f"and keywords {sorted(template['kwargs'])}; called with {len(args)} and {sorted(kwargs)}")
    for i, (n, v) in enumerate(zip(template["args"], args)):
        walk(n, v, str(i))
    for k, n in template["kwargs"].items():
        walk(n, kwargs[k], k)
    return found


def output_tensors(value: Any, where: str = "output") -> list[Any]:
    """The tensors of a forward's return value: a tensor, None, or tuples and lists of those; also a model
    output that is a mapping (a `transformers` ModelOutput) for whole-model comparisons. Raises Unextractable
    for anything else."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if value is None:
        return []
    if isinstance(value, (tuple, list)):
        return [t for i, v in enumerate(value) for t in output_tensors(v, f"{where}[{i}]")]
    if hasattr(value, "keys") and hasattr(value, "__getitem__"):
        return [t for k in value.keys() for t in output_tensors(value[k], f"{where}.{k}")]
    raise Unextractable(f"{where} is a {type(value).__name__}, not tensors")


def plain_output(value: Any, where: str = "output") -> None:
    """Raise Unextractable unless `value` is what the harness compares: a tensor, or tuples and lists of tensors
    (and None, which it records as such)."""
    import torch

    if isinstance(value, torch.Tensor) or value is None:
        return
    if type(value) in (tuple, list):
        for i, v in enumerate(value):
            plain_output(v, f"{where}[{i}]")
        return
    raise Unextractable(f"it returns a {type(value).__name__}; the task format returns tensors or tuples of them")
