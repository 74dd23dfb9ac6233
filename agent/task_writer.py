"""One submodule of a user's model as the source of a KernelBench-format task file.

The file is self-contained: it needs the submodule's classes importable (from an installed package, from a
folder it names that the harness's sandbox sees, or from the user modules it carries: `agent.user_code`) and
nothing else of the user's code. It holds:
- the submodule's structure, pickled with its tensors on the `meta` device (no weights), and the values of its
  buffers (rotary tables and the like, which no random draw can stand in for), base64 in `_BLOB`;
- for each parameter the mean and standard deviation of the user's weights: `Model()` draws its parameters
  from normals of those moments, so the task runs at the magnitudes of the real model;
- `CALL`, the call's template (`agent.call_template`), and `INPUTS`, how `get_inputs()` builds each flat tensor:
  floating tensors as normals with the captured mean and deviation, other tensors (positions, ids, masks) with
  the captured values;
- `KEEP_STATE_DICT = True`: the harness checks that `ModelNew` has `Model`'s parameter and buffer names and shapes,
  and judges it with `Model`'s weights loaded (docs/harness.md), so the kernel can take the trained weights later.
`Model` subclasses the submodule's class and adopts its attributes, so its `state_dict` names are the submodule's
own (`gate_proj.weight`, never `inner.gate_proj.weight`) and its forward is the class's forward on them (an
`nn.Sequential` iterates itself as it did in the model).
"""

from __future__ import annotations

import base64
import copy
import inspect
import io
import textwrap
from typing import Any

from agent.call_template import Unextractable
from agent.user_code import ImportPlan

# Imports inside functions: torch (1-2 s to import) loads when this module's work runs; importing it stays free of
# torch, and so do the modules that import it at their top.

MAX_EMBEDDED = 1 << 16
"""Elements of a buffer or a non-floating input written into the file by value, at most; more is unextractable."""
SOURCE_LIMIT = 12000
"""Characters of the submodule's class sources quoted in the file for the reader (a model writing ModelNew)."""

HEADER = '''"""{title}

Extracted by `kernel-agent hotspots` from `{entry}`: the submodule `{path}` ({kind}), {share:.1%} of the forward
on {device}. `Model()` builds that submodule alone, with random weights of the real ones' magnitudes, and
`forward(*inputs)` calls it as the model did (CALL maps the flat inputs to its arguments).

Weights travel (KEEP_STATE_DICT): ModelNew must keep these parameter and buffer names and shapes; the harness
loads Model's weights into it, and `kernel-agent apply` later loads the trained ones:
{state}
"""

import base64
import io
import sys

import torch
import torch.nn as nn

OP_POLICY = "partial"
KEEP_STATE_DICT = True
ENTRY = {entry!r}
SUBMODULE = {path!r}
CALL = {call!r}
INPUTS = {inputs!r}
"""Per flat input: ("normal", shape, dtype, mean, std) or ("value", index into the blob's values)."""
for _folder in {folders!r}:  # where the submodule's classes are defined (outside the interpreter's packages)
    if _folder not in sys.path:
        sys.path.insert(0, _folder)
{carried}_BLOB = (  # base64 of the submodule's pickled structure and buffers
{blob}
)
_CACHE = {{}}


def _blob():
    if not _CACHE:
        _CACHE.update(torch.load(io.BytesIO(base64.b64decode("".join(_BLOB))), weights_only=False))
    return _CACHE


def _arguments(node, inputs):
    if "t" in node:
        return inputs[node["t"]]
    if "c" in node:
        return node["c"]
    if "tuple" in node:
        return tuple(_arguments(n, inputs) for n in node["tuple"])
    return [_arguments(n, inputs) for n in node["list"]]


class Model(type(_blob()["structure"])):  # the submodule's own class: its methods, properties and dunders
    def __init__(self):
        nn.Module.__init__(self)  # not the class's own __init__, whose arguments the file does not know
        blob = _blob()
        inner = blob["structure"].to_empty(device="cpu")
        with torch.no_grad():
            for name, p in inner.named_parameters():
                mean, std = blob["moments"][name]
                p.normal_(mean, std) if std > 0 else p.fill_(mean)
            for name, b in inner.named_buffers():
                b.copy_(blob["buffers"][name])
        self.__dict__.update(inner.__dict__)  # its parameters, buffers, children and settings, under their own names

    def forward(self, *inputs):
        args = [_arguments(n, inputs) for n in CALL["args"]]
        kwargs = {{k: _arguments(n, inputs) for k, n in CALL["kwargs"].items()}}
        return super().forward(*args, **kwargs)


def get_inputs():
    values = _blob()["values"]
    out = []
    for spec in INPUTS:
        if spec[0] == "normal":
            _, shape, dtype, mean, std = spec
            out.append(torch.randn(shape, dtype=getattr(torch, dtype)) * std + mean)
        else:
            out.append(values[spec[1]].clone())
    return out


def get_init_inputs():
    return []
'''


CARRIED = '''_SOURCES = {{
{entries}
}}
"""The user's modules the harness's sandbox cannot read from disk: name -> (is a package, file, source)."""

import importlib.abc  # noqa: E402 (with the carried sources: a file that carries none needs no finder)
import importlib.util  # noqa: E402


class _CarriedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves _SOURCES to `import` (and to unpickling the structure) by name."""

    def find_spec(self, name, path=None, target=None):
        if name not in _SOURCES:
            return None
        is_package, file, _ = _SOURCES[name]
        return importlib.util.spec_from_loader(name, self, origin=file, is_package=is_package)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = module.__spec__.origin
        exec(compile(_SOURCES[module.__name__][2], module.__file__, "exec"), module.__dict__)


sys.meta_path.insert(0, _CarriedModules())
'''
"""The task file's part that carries user modules (`agent.user_code`), when it carries any."""


def _meta_copy(module: Any) -> Any:
    """The module with every parameter and buffer on the `meta` device (shapes, dtypes, no data)."""
    import torch

    memo: dict[int, Any] = {}
    for p in module.parameters():
        memo[id(p)] = torch.nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
    for b in module.buffers():
        memo[id(b)] = torch.empty_like(b, device="meta")
    return copy.deepcopy(module, memo)


def _moments(t: Any) -> tuple[float, float]:
    x = t.detach().double()
    return (float(x.mean()), float(x.std())) if x.numel() > 1 else (float(x.flatten()[0]) if x.numel() else 0.0, 0.0)


def blob_of(module: Any, tensors: list[Any]) -> tuple[str, list[tuple[Any, ...]]]:
    """(base64 blob, INPUTS) of a submodule and its call's flat tensors; raises Unextractable (a buffer or a
    non-floating input too large to write by value, a structure that does not pickle)."""
    import torch

    buffers = {}
    for name, b in module.named_buffers():
        if b.numel() > MAX_EMBEDDED:
            raise Unextractable(f"buffer {name} has {b.numel()} elements (at most {MAX_EMBEDDED} are written by value)")
        buffers[name] = b.detach().to("cpu").clone()
    inputs: list[tuple[Any, ...]] = []
    values: list[Any] = []
    for i, t in enumerate(tensors):
        dtype = str(t.dtype).removeprefix("torch.")
        if t.is_floating_point():
            inputs.append(("normal", list(t.shape), dtype, *_moments(t)))
        elif t.numel() <= MAX_EMBEDDED:
            inputs.append(("value", len(values)))
            values.append(t.detach().to("cpu").clone())
        else:
            raise Unextractable(f"input {i} ({dtype}, {t.numel()} elements) is not floating and too large to write "
                                f"by value")
    moments = {name: _moments(p) for name, p in module.named_parameters()}
    buf = io.BytesIO()
    try:
        torch.save({"structure": _meta_copy(module), "buffers": buffers, "moments": moments, "values": values}, buf)
    except Exception as e:
        raise Unextractable(f"its structure does not pickle: {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
    return base64.b64encode(buf.getvalue()).decode("ascii"), inputs


def state_lines(module: Any) -> str:
    rows = [f"    {k}: {str(v.dtype).removeprefix('torch.')} {list(v.shape)}" for k, v in module.state_dict().items()]
    return "\n".join(rows) or "    (none: the submodule has no parameters or buffers)"


def class_sources(module: Any) -> str:
    """The source of each class in the submodule's tree outside `torch` (what its forward computes), as comment
    lines, within `SOURCE_LIMIT` characters."""

    seen, parts = set(), []
    for m in module.modules():
        cls = type(m)
        if cls in seen or cls.__module__.startswith("torch."):
            continue
        seen.add(cls)
        try:
            parts.append(f"{cls.__module__}.{cls.__qualname__}:\n{textwrap.dedent(inspect.getsource(cls))}")
        except (OSError, TypeError):
            parts.append(f"{cls.__module__}.{cls.__qualname__}: (source not available)")
    text = "\n".join(parts)
    if len(text) > SOURCE_LIMIT:
        text = text[:SOURCE_LIMIT] + "\n... (cut)"
    return "\n".join("# " + line if line else "#" for line in text.splitlines())


def task_source(*, entry: str, path: str, module: Any, share: float, device: str, template: dict[str, Any],
                tensors: list[Any], plan: ImportPlan) -> str:
    """The task file's text (see the module docstring); raises Unextractable from `blob_of`."""
    blob, inputs = blob_of(module, tensors)
    lines = "\n".join(f'    "{blob[i:i + 100]}"' for i in range(0, len(blob), 100))
    entries = "\n".join(f"    {name!r}: {value!r}," for name, value in plan.sources.items())
    carried = CARRIED.format(entries=entries) + "\n\n" if plan.sources else ""
    text = HEADER.format(title=f"{path} ({type(module).__name__}) of {entry}", entry=entry, path=path,
                         kind=type(module).__name__, share=share, device=device, state=state_lines(module),
                         call=template, inputs=inputs, folders=plan.folders, carried=carried, blob=lines)
    return text + "\n\n# What the submodule computes (its classes' source, for reading; Model above runs it):\n" \
        + class_sources(module) + "\n"
