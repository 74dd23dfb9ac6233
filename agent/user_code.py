"""How an extracted task file imports the user's classes: from a folder, or from sources the file carries.

A submodule's classes come from three kinds of place:
- the interpreter's own packages (`transformers`, `torch`): the harness's children import them as the user does;
- a folder the harness's sandbox sees (`/srv/project`): the task file puts it on `sys.path`;
- a folder the sandbox hides ($HOME and /tmp, `kernelbench.harness.isolation.bwrap.hidden_roots`: where most people keep
  their code), or the ENTRY script itself: the task file carries the source of the classes' modules and of the
  user modules they import from there (`sources`, `_carried`) and serves them to `import` by name, so the
  harness's children import the same code the user ran, without seeing the user's folders.
Compiled modules and sources past `MAX_SOURCE_CHARS` cannot be carried: those classes are unextractable, with
the reason (install the package where the sandbox sees it).
"""

from __future__ import annotations

import ast
import os
import site
import sys
from dataclasses import dataclass, field
from typing import Any

from agent.call_template import Unextractable
from kernelbench.harness.isolation.bwrap import hidden_roots

MAX_SOURCE_CHARS = 2_000_000
"""Characters of user source one task file carries, at most (a whole package of ordinary size fits)."""
ENTRY_PREFIX = "kernel_agent_entry_"
"""The module name `agent.entry` gives an ENTRY script (`path/to/script.py:build`)."""
PROJECT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
"""kernel-agent's own source folder: its modules are the harness's, never the user's to carry."""


@dataclass(frozen=True)
class ImportPlan:
    folders: list[str] = field(default_factory=list)
    """Folders the sandbox sees that hold the classes' modules: put on `sys.path`."""
    sources: dict[str, tuple[bool, str, str]] = field(default_factory=dict)
    """module name -> (is a package, its file, its source) for the modules the file carries."""


def _shared() -> list[str]:
    return [os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, *site.getsitepackages(),
                                          site.getusersitepackages())]


def _under(path: str, roots: list[str] | tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def _hidden_roots() -> tuple[str, ...]:
    return hidden_roots()


def _file(module: Any) -> str:
    """The module's file, or "" for none (builtins, namespaces, and torch's `_classes`, whose file is relative)."""
    raw = getattr(module, "__file__", None)
    return os.path.realpath(raw) if isinstance(raw, str) and os.path.isabs(raw) else ""


def _imports(name: str, source: str, is_package: bool) -> set[str]:
    """The absolute module names `source` (module `name`) may import, anywhere in it (a function's lazy import
    too), with their parent packages; `from pkg import x` counts `pkg.x` in case x is a module."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    return {".".join(n.split(".")[:i]) for n in found if n for i in range(1, n.count(".") + 2)}


def _carriable(name: str, hidden: tuple[str, ...], shared: list[str]) -> tuple[bool, str] | None:
    """(is a package, file) of a loaded user module no child could import from disk; None otherwise."""
    mod = sys.modules.get(name)
    file = _file(mod) if mod is not None else ""
    if name == "__main__" or not file.endswith(".py") or _under(file, shared) or _under(file, [PROJECT]) \
            or not os.path.isfile(file) or not (name.startswith(ENTRY_PREFIX) or _under(file, hidden)):
        return None
    return hasattr(mod, "__path__"), file


def _carried(needed: set[str], hidden: tuple[str, ...], shared: list[str]) -> dict[str, tuple[bool, str, str]]:
    """The modules to carry: `needed` (the classes' modules) and, transitively, every loaded user module they
    import that no child could import from disk, by name. Only these: a task file goes into prompts, maybe to
    a remote model, so the user's other modules (settings, keys) never travel with it."""
    out: dict[str, tuple[bool, str, str]] = {}
    total = 0
    queue = sorted({".".join(n.split(".")[:i]) for n in needed for i in range(1, n.count(".") + 2)})
    while queue:
        name = queue.pop()
        where = _carriable(name, hidden, shared) if name not in out else None
        if where is None:
            continue
        with open(where[1], encoding="utf-8") as f:
            text = f.read()
        total += len(text)
        if total > MAX_SOURCE_CHARS:
            raise Unextractable(f"the user modules it would carry exceed {MAX_SOURCE_CHARS} characters of source; "
                                f"install the package outside $HOME and /tmp so the harness's sandbox sees it")
        out[name] = (where[0], where[1], text)
        try:
            queue.extend(sorted(_imports(name, text, where[0]) - set(out)))
        except SyntaxError as e:  # it ran, so the file changed on disk since: what ran cannot be carried
            raise Unextractable(f"{where[1]} no longer parses (line {e.lineno}: {e.msg}); it changed since it was "
                                f"imported: run hotspots again") from None
    return dict(sorted(out.items()))


def import_plan(module: Any) -> ImportPlan:
    """How the task file of `module` imports its classes (module docstring); raises Unextractable for a class no
    child could import: one defined in a function or in `__main__`, or compiled and hidden."""
    shared, hidden = _shared(), _hidden_roots()
    plan = ImportPlan()
    carry: set[str] = set()
    for m in module.modules():
        cls = type(m)
        mod = sys.modules.get(cls.__module__)
        name = f"{cls.__module__}.{cls.__qualname__}"
        if "<locals>" in cls.__qualname__ or mod is None or cls.__module__ == "__main__":
            raise Unextractable(f"class {name} is defined in a function or in __main__; define it in a module")
        file = _file(mod)
        if not file or _under(file, shared):
            continue
        root = os.path.dirname(file)
        for _ in range(cls.__module__.count(".") + (os.path.basename(file) == "__init__.py")):
            root = os.path.dirname(root)
        if cls.__module__.startswith(ENTRY_PREFIX) or _under(root, hidden):
            if not file.endswith(".py"):
                raise Unextractable(f"class {name} is compiled ({file}) under a folder the harness's sandbox hides "
                                    f"($HOME, /tmp); install the package or move it")
            carry.add(cls.__module__)
            if cls.__module__.startswith(ENTRY_PREFIX) and not _under(root, hidden):
                root_folder = os.path.dirname(file)  # the script's visible siblings import as when it runs
                if root_folder not in plan.folders:
                    plan.folders.append(root_folder)
        elif root not in plan.folders:
            plan.folders.append(root)
    if carry:
        plan.sources.update(_carried(carry, hidden, shared))
    return plan


class as_a_child_sees:
    """Within the block this process imports as a harness child would: the carried modules are out of
    `sys.modules` and the folders the sandbox hides off `sys.path`, so a check here imports the carried modules
    from the task file and fails on anything else hidden; everything is put back afterwards (the task file's
    finder too)."""

    def __init__(self, names: list[str]):
        self.names = names
        self.saved: dict[str, Any] = {}
        self.finders: list[Any] = []
        self.path: list[str] = []

    def __enter__(self) -> "as_a_child_sees":
        hidden, keep = _hidden_roots(), _shared() + [PROJECT]
        self.finders, self.path = list(sys.meta_path), list(sys.path)
        self.saved = {n: sys.modules.pop(n) for n in self.names if n in sys.modules}
        sys.path[:] = [p for p in sys.path
                       if not _under(os.path.realpath(p or "."), hidden) or _under(os.path.realpath(p or "."), keep)]
        return self

    def __exit__(self, *exc: Any) -> None:
        for n in self.names:
            sys.modules.pop(n, None)
        sys.modules.update(self.saved)
        sys.meta_path[:] = self.finders
        sys.path[:] = self.path
