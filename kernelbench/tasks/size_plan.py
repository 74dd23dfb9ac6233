"""Which module constants of a KernelBench-format problem are sizes, and their consistent values at one scale.

A KernelBench problem states its sizes as module-level constants (`batch_size = 4096`, `dim = 393216`) that
`get_inputs()` and `get_init_inputs()` read when called, so a CPU size is a dict of new values for them
(`CPU_SIZE`, kernelbench/tasks/problem.py). This module reads the file with `ast` only (nothing runs here) and
maps one knob, `alpha` in [0, 1], to such a dict: every scalable integer `v` becomes about `v ** alpha`.
A power rather than a common factor shrinks the big dimensions most and keeps a batch of 16 from
collapsing to 1 while a 393216-wide row is still wide; log(work) is then close to linear in `alpha`, which
the search in kernelbench/sizes/size_probe.py relies on.

What stays consistent:
- structural integers are kept: kernel sizes, strides, paddings, dilations, group and head counts, patch
  and pool sizes, layer counts (by name), and every integer below `MIN_SCALABLE` (axes like `dim = 1`);
- a kept count that divided a size still divides it (`num_heads | embed_dim`, `num_groups | channels`,
  `patch_size | image_size`);
- sizes that were equal stay equal, and a size that divided another still divides it (`in == out` for a
  residual add, `seq_len | max_seqlen`), so `reshape`s and channel groups keep working;
- constants computed from others (`bias_shape = (out_channels, 1, 1)`, `groups = in_channels`) are
  recomputed from the new values and recorded too, since `CPU_SIZE` overrides after the file ran.
Not covered: sizes written as literals inside `get_inputs` or `Model` (`torch.rand(b, 3, 224, 224)`), which
no module constant can change; the measurement says how slow such a task stays.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from dataclasses import dataclass
from typing import Any

MIN_SCALABLE = 8
"""Integers below this are axes, small channel counts or flags, never scaled."""

STRUCTURAL = re.compile(r"kernel|stride|pad|dilat|group|head|pool|patch|ratio|(^|_)(num_)?layers$|stages$|"
                        r"block_len|eps|momentum|drop|alpha|scale|factor|multiplier|divisor|slope|clamp|(^|_)value")
"""Names of integers that shape the computation rather than size it: kept as they are."""

BATCH = re.compile(r"batch")
"""A batch may shrink to 1; other sizes keep a floor (`knob_values`)."""

GEOMETRY = re.compile(r"kernel|stride|pad|dilat")
"""Kept integers that need not divide anything (a 3-wide kernel says nothing about the channel count)."""

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.Pow: operator.pow, ast.Div: operator.truediv}


class NotConstant(ValueError):
    """An expression this module does not evaluate (a call, an attribute, an unknown name)."""


def evaluate(node: ast.AST, names: dict[str, Any]) -> Any:
    """A module constant's value from its expression: literals, earlier constants, arithmetic, tuples and
    lists (`[1024] * 16`). Anything else raises NotConstant: nothing is executed here."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)) or (
            isinstance(node, ast.Constant) and node.value is None):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise NotConstant(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [evaluate(e, names) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = evaluate(node.operand, names)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = evaluate(node.left, names), evaluate(node.right, names)
        if isinstance(node.op, ast.Pow) and isinstance(right, int) and abs(right) > 64:
            raise NotConstant("large power")
        if isinstance(node.op, ast.Mult) and isinstance(left, (list, tuple)) and isinstance(right, int) and right > 4096:
            raise NotConstant("long list")
        return _BINOPS[type(node.op)](left, right)
    raise NotConstant(ast.dump(node)[:40])


@dataclass(frozen=True)
class Knob:
    """One integer of the problem's module constants: a scalar (`index` -1) or an item of a tuple/list."""

    name: str
    index: int
    value: int
    scalable: bool
    kept_because: str = ""
    """Why a knob is not scalable: `structural name`, `below 8`, `used by an expression not evaluated here`."""

    @property
    def label(self) -> str:
        return self.name if self.index < 0 else f"{self.name}[{self.index}]"


@dataclass(frozen=True)
class SizePlan:
    """What `plan_sizes` read from one problem file."""

    constants: dict[str, Any]
    """Every module constant evaluated here, at the file's own values, in file order."""
    base: tuple[str, ...]
    """Constants given by literals: the ones scaling sets."""
    derived: tuple[tuple[str, ast.expr], ...]
    """Constants computed from others, recomputed at each scale, in file order."""
    knobs: tuple[Knob, ...]

    @property
    def scalable(self) -> tuple[Knob, ...]:
        return tuple(k for k in self.knobs if k.scalable)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_items(value: Any) -> list[tuple[int, int]]:
    """(index, value) of a constant's integers: -1 for a scalar, positions for a tuple or list of ints."""
    if _is_int(value):
        return [(-1, value)]
    if isinstance(value, (tuple, list)) and value and all(_is_int(v) for v in value):
        return list(enumerate(value))
    return []


def _assignments(tree: ast.Module):
    """Module-level `name = expr` statements; `a = b = 1` as is, and `d, h, w = 16, 32, 32` as three."""
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if all(isinstance(t, ast.Name) for t in node.targets):
            yield node
        elif (len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple)
              and len(node.targets[0].elts) == len(node.value.elts)
              and all(isinstance(t, ast.Name) for t in node.targets[0].elts)):
            for target, value in zip(node.targets[0].elts, node.value.elts):
                yield ast.Assign(targets=[target], value=value, lineno=node.lineno)


def plan_sizes(source: str) -> SizePlan:
    """Read a problem's module constants and decide which integers scale (see the module docstring)."""
    tree = ast.parse(source)
    constants: dict[str, Any] = {}
    base: list[str] = []
    derived: list[tuple[str, ast.expr]] = []
    opaque_refs: set[str] = set()
    for node in _assignments(tree):
        refs = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
        try:
            value = evaluate(node.value, constants)
        except (NotConstant, ArithmeticError, TypeError, ValueError):
            value = NotConstant
            opaque_refs |= refs  # a constant built by a call from a size: that size must stay as it is
        for target in node.targets:  # `height = width = 256`: two constants
            name = target.id
            base = [b for b in base if b != name]
            derived = [d for d in derived if d[0] != name]
            if value is NotConstant:
                constants.pop(name, None)
                continue
            is_derived = bool(refs & set(constants))
            constants[name] = value
            (derived.append((name, node.value)) if is_derived else base.append(name))
    knobs = []
    for name in base:
        for index, value in _int_items(constants[name]):
            why = ("used by an expression not evaluated here" if name in opaque_refs else
                   "structural name" if STRUCTURAL.search(name.lower()) else
                   f"below {MIN_SCALABLE}" if abs(value) < MIN_SCALABLE else "")
            knobs.append(Knob(name, index, value, scalable=not why, kept_because=why))
    return SizePlan(constants=constants, base=tuple(base), derived=tuple(derived), knobs=tuple(knobs))


def _lcm(values: list[int]) -> int:
    out = 1
    for v in values:
        out = out * v // math.gcd(out, v)
    return out


def _is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def knob_values(plan: SizePlan, alpha: float, frozen: frozenset[str] = frozenset(),
                loose: frozenset[str] = frozenset(), floor: int = 1) -> dict[str, int]:
    """New value of each knob (by label) at scale `alpha`; knobs in `frozen` (labels) keep their value, and
    knobs in `loose` drop their divisibility by others (the search loosens a knob when that divisibility was
    a coincidence that keeps it large, such as `num_groups = 512` dividing `batch_size = 1024`). No size but
    a batch goes below `floor` (or its own value when smaller): 8 channels rather than 1 keep the problem's
    character where sizes written as literals leave little to shrink."""
    values: dict[str, int] = {}
    kept = [k for k in plan.knobs if not k.scalable or k.label in frozen]
    for k in kept:
        values[k.label] = k.value
    divisors = [k.value for k in kept if k.value >= 2 and not k.scalable and not GEOMETRY.search(k.name.lower())]
    done: list[tuple[int, int]] = []  # (original, new) of scaled knobs so far, smallest first
    # among equal sizes a batch comes last, so the group takes a non-batch size's floor
    order = sorted((k for k in plan.knobs if k.scalable and k.label not in frozen),
                   key=lambda k: (k.value, bool(BATCH.search(k.name.lower())), k.label))
    for k in order:
        same = next((new for old, new in done if old == k.value), None)
        if same is not None:  # equal sizes stay equal
            values[k.label] = same
            done.append((k.value, same))
            continue
        need = [] if k.label in loose else [d for d in divisors if k.value % d == 0]
        need += [] if k.label in loose else [new for old, new in done if new >= 2 and k.value % old == 0]
        step = _lcm(need)
        target = max(k.value ** alpha, 1.0 if BATCH.search(k.name.lower()) else min(k.value, floor))
        if _is_pow2(step) and _is_pow2(k.value) and target >= 8:
            # a power of two becomes a multiple of a large power of two (quarter-octave steps: 1024, 1280,
            # 1536, 1792, 2048): fine enough for the search, and divisible by the sizes scaled before it
            step = max(step, 2 ** (int(math.log2(target)) - 2))
        new = step * max(1, round(target / step))
        values[k.label] = new
        done.append((k.value, new))
    return values


def constants_at(plan: SizePlan, alpha: float, frozen: frozenset[str] = frozenset(),
                 loose: frozenset[str] = frozenset(), floor: int = 1) -> dict[str, Any]:
    """The overrides for scale `alpha`: every base and derived constant whose value changes (a `CPU_SIZE`)."""
    values = knob_values(plan, alpha, frozen, loose, floor)
    names: dict[str, Any] = {}
    for name in plan.base:
        value = plan.constants[name]
        items = _int_items(value)
        if items and items[0][0] == -1:
            value = values.get(name, value)
        elif items:
            new = [values.get(f"{name}[{i}]", v) for i, v in items]
            value = tuple(new) if isinstance(value, tuple) else new
        names[name] = value
    for name, expr in plan.derived:
        names[name] = evaluate(expr, names)
    return {n: v for n, v in names.items() if v != plan.constants.get(n)}


def literal_sizes(source: str, function: str = "get_inputs") -> list[int]:
    """Integer literals of MIN_SCALABLE or more written inside `function` (`torch.rand(b, 3, 224, 224)`):
    sizes no module constant can change, named when a problem stays slow."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and _is_int(n.value)
                    and n.value >= MIN_SCALABLE]
    return []
