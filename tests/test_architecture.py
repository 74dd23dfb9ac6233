"""The architecture's rules, read from the source with `ast` (nothing is imported): docs/architecture.md.

- no import circle among the project's modules (imports inside functions count: they run sooner or later);
- `train/` imports nothing from `evals/` (what spans both sits above them, in `cli/`);
- no module of `kernelbench/` exceeds 400 lines, the built-in task files and reference solutions aside;
- `kernelbench/` is layered (HARNESS_LAYERS): task records at the bottom, then the parent<->child records,
  the sandboxed child, the sandbox, building, insight, judging, size derivation, the executors; every import
  points down, the child imports only the records, the task records and its own modules, and nothing outside
  the child imports its entry points;
- the spine is measured, not listed: the modules a CPU evaluation and a GRPO step can import (their import
  closure, imports inside functions included) stay within a budget, each module at most 400 lines.

A failure names what it found: the circle with the line of each import in it, the import from `evals/`,
the file and its length.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent", "cli", "evals", "jobs", "kernelbench", "rewards", "train")
MAX_LINES = 400
SIZE_EXEMPT = ("kernelbench/tasks/solutions/", "kernelbench/tasks/builtin_tasks/")
"""Problem files and reference solutions: data in the task format, not library code."""
HARNESS_LAYERS = (
    ("task records, config files", ("kernelbench.tasks", "kernelbench.config_files")),
    ("parent<->child records", ("kernelbench.harness.protocol", "kernelbench.harness.record_codec",
                                "kernelbench.harness.config")),
    ("sandboxed child", ("kernelbench.harness.child",)),
    ("sandbox", ("kernelbench.harness.isolation",)),
    ("building", ("kernelbench.harness.build",)),
    ("insight", ("kernelbench.harness.insight",)),
    ("judging", ("kernelbench.harness",)),
    ("size derivation", ("kernelbench.sizes",)),
    ("executors", ("kernelbench.executors",)),
)
"""`kernelbench/`'s layers, bottom first (docs/architecture.md): a module belongs to the first layer with a
matching prefix, looked up longest prefix first; it may import its own layer and those below."""
CHILD_MAY_IMPORT = ("kernelbench.harness.child", "kernelbench.harness.protocol", "kernelbench.harness.record_codec",
                    "kernelbench.tasks", "kernelbench")
"""The sandboxed child: its own modules, the records both ends speak, the task it runs (`kernelbench` itself:
its `__init__` runs on every import)."""
CHILD_ENTRY_POINTS = ("kernelbench.harness.child.worker", "kernelbench.harness.child.zygote",
                      "kernelbench.harness.child.candidate_run", "kernelbench.harness.child.reference")
"""What the child runs as its job; the parent starts them by module name and reads what they leave through
`child.result_files`, `child.report` and `protocol`, never by importing them."""

SPINE_ROOTS = {
    "CPU evaluation": ("kernelbench.harness.evaluate", "kernelbench.harness.child.worker",
                       "kernelbench.harness.child.zygote"),
    "GRPO step": ("train.grpo", "kernelbench.harness.child.worker", "kernelbench.harness.child.zygote"),
}
"""Where one kernel's path starts: the evaluation's entry and the training entry, plus the child's entry points,
which start by module name (`python -m`, the zygote's fork) where no import statement shows them."""
SPINE_BUDGET = {"CPU evaluation": (88, 14_000), "GRPO step": (130, 19_000)}
"""(modules, lines) each closure may reach: measured 83 / 13,181 and 123 / 18,132 when set, with room for a
module or two; a closure that grows past it is a dependency someone should look at, not a number to raise
without a look."""


# ---------------------------------------------------------------- the import graph

def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under `packages` (a package is its `__init__.py`)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, files: dict[str, Path]) -> list[str]:
    """The project modules an import statement loads: `import a.b.c` -> a.b.c (or its nearest enclosing
    module when c is a name in a.b); `from a import b` -> module a.b when there is one, else a."""

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    if isinstance(node, ast.Import):
        found = [resolve(alias.name) for alias in node.names]
    else:
        if node.level:  # relative: resolved against the importing module's package
            package = module.split(".") if is_package else module.split(".")[:-1]
            base = ".".join(package[:len(package) - (node.level - 1)] + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        found = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else resolve(base) for alias in node.names]
    return [name for name in found if name and name != module]


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """module -> {project module it imports: line of the first such import}, from every import statement in
    the file (top level, inside functions, under `if TYPE_CHECKING`). Parent packages' `__init__` run on
    import too, but a package importing its own submodules is the normal shape of a package, not a circle,
    so those implicit edges are left out."""
    files = module_files(root, packages)
    graph: dict[str, dict[str, int]] = {}
    for module, path in files.items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, path.name == "__init__.py", node, files):
                    edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[module] = edges
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def one_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest circle through the component's first module, as [a, b, ..., a] (breadth-first)."""
    members, start = set(component), component[0]
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if child in members and child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"no circle through {start} in {component}")


def describe_cycle(graph: dict[str, dict[str, int]], files: dict[str, Path], cycle: list[str]) -> str:
    steps = [f"{a} -> {b} ({files[a].relative_to(ROOT)}:{graph[a][b]})" for a, b in zip(cycle, cycle[1:])]
    return "circle: " + " -> ".join(cycle) + "\n    " + "\n    ".join(steps)


def describe_component(graph: dict[str, dict[str, int]], files: dict[str, Path], component: list[str]) -> str:
    """One circle of a strongly connected component, and the component's other members when it has more."""
    cycle = one_cycle(graph, component)
    rest = sorted(set(component) - set(cycle))
    return describe_cycle(graph, files, cycle) + (f"\n    (same knot: {', '.join(rest)})" if rest else "")


@pytest.fixture(scope="module")
def project():
    return import_graph(ROOT, PACKAGES), module_files(ROOT, PACKAGES)


# ---------------------------------------------------------------- the reader itself

def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_graph_counts_imports_inside_functions_and_names_the_circle(tmp_path):
    """The checks below are only as good as the graph: a circle closed by an import inside a function, and
    `from package import module`, are both found, and the circle is listed in order."""
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": "import os\n\ndef later():\n    from pkg.c import thing\n    return thing\n",
        "pkg/c.py": "import pkg.a as alias\nthing = 1\n",
        "pkg/d.py": "from pkg.a import something_defined_in_a\nfrom . import c\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.b"] == {"pkg.c": 4}
    assert graph["pkg.d"] == {"pkg.a": 1, "pkg.c": 2}
    assert strongly_connected(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert one_cycle(graph, ["pkg.a", "pkg.b", "pkg.c"]) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    _write(tmp_path, {"pkg/c.py": "thing = 1\n"})
    assert strongly_connected(import_graph(tmp_path, ("pkg",))) == []


def test_graph_of_the_project_holds_its_known_edges(project):
    graph, files = project
    assert len(files) > 100
    assert "kernelbench.harness.result" in graph["agent.episode"]  # top level
    assert "agent.openai_backend" in graph["agent.backends"]  # inside make_policy


# ---------------------------------------------------------------- the rules

def test_no_import_circles(project):
    graph, files = project
    circles = [describe_component(graph, files, c) for c in strongly_connected(graph)]
    if circles:
        pytest.fail(f"{len(circles)} import circle(s):\n" + "\n".join(circles), pytrace=False)


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


LAYERS_ABOVE = {
    "train": ("evals", "jobs", "cli"),
    "evals": ("train", "jobs", "cli"),
    "agent": ("train", "evals", "jobs", "cli"),
    "rewards": ("agent", "train", "evals", "jobs", "cli"),
    "kernelbench": ("agent", "train", "evals", "jobs", "cli"),
    "jobs": ("cli",),
}
"""What each package must not import: the packages above it in docs/architecture.md's table (train and evals
side by side, neither importing the other)."""


def test_train_imports_nothing_from_evals(project):
    graph, files = project
    found = [f"{files[m].relative_to(ROOT)}:{line} imports {t}" for m, edges in sorted(graph.items())
             if _in(m, "train") for t, line in sorted(edges.items()) if _in(t, "evals")]
    if found:
        pytest.fail("train/ must not import evals/ (jobs/ and cli/ sit above both):\n" + "\n".join(found),
                    pytrace=False)


def test_no_package_imports_one_above_it(project):
    graph, files = project
    found = [f"{files[m].relative_to(ROOT)}:{line} imports {t}" for m, edges in sorted(graph.items())
             for pkg, above in LAYERS_ABOVE.items() if _in(m, pkg)
             for t, line in sorted(edges.items()) if any(_in(t, a) for a in above)]
    if found:
        pytest.fail("imports that point up the layers (docs/architecture.md):\n" + "\n".join(found), pytrace=False)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_kernelbench_modules_are_at_most_400_lines():
    too_long = [f"{rel}: {n} lines" for path in sorted((ROOT / "kernelbench").rglob("*.py"))
                if not (rel := path.relative_to(ROOT).as_posix()).startswith(SIZE_EXEMPT)
                and (n := _lines(path)) > MAX_LINES]
    if too_long:
        pytest.fail(f"kernelbench/ modules over {MAX_LINES} lines:\n" + "\n".join(too_long), pytrace=False)


def layer_of(module: str, layers: tuple[tuple[str, tuple[str, ...]], ...] = HARNESS_LAYERS) -> int | None:
    """Index of the layer `module` belongs to (longest matching prefix), or None outside `kernelbench/`."""
    best = None
    for index, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if _in(module, prefix) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return best[0] if best else None


def layer_violations(graph: dict[str, dict[str, int]], layers=HARNESS_LAYERS) -> list[tuple[str, int, str]]:
    """(module, line, imported) for every import that points up the layers."""
    found = []
    for module, edges in sorted(graph.items()):
        here = layer_of(module, layers)
        for target, line in sorted(edges.items()):
            there = layer_of(target, layers)
            if here is not None and there is not None and there > here:
                found.append((module, line, target))
    return found


def closure(graph: dict[str, dict[str, int]], roots: tuple[str, ...]) -> set[str]:
    """Every module the roots can import: imports inside functions count, and so does each parent package's
    `__init__` (Python runs it before the module)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen or module not in graph:
            continue
        seen.add(module)
        todo += list(graph[module])
        todo += [".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)]
    return seen


def test_layer_reader_finds_an_upward_import_and_the_longest_prefix_wins():
    """The layer rules below are only as good as this reader: a child module importing a judging module is
    found, the sub-package wins over its parent's prefix, and an import down is allowed."""
    graph = {"kernelbench.harness.child.timing": {"kernelbench.harness.paired": 7, "kernelbench.harness.protocol": 3},
             "kernelbench.harness.paired": {"kernelbench.harness.child.timing": 2},
             "kernelbench.harness.build.builder": {"kernelbench.harness.isolation.sandbox": 5}}
    assert layer_of("kernelbench.harness.child.timing") < layer_of("kernelbench.harness.paired")
    assert layer_violations(graph) == [("kernelbench.harness.child.timing", 7, "kernelbench.harness.paired")]
    assert closure(graph, ("kernelbench.harness.paired",)) == {"kernelbench.harness.paired",
                                                                  "kernelbench.harness.child.timing"}


def test_kernelbench_layers_point_down(project):
    graph, files = project
    names = [name for name, _ in HARNESS_LAYERS]
    found = [f"{files[m].relative_to(ROOT)}:{line} ({names[layer_of(m)]}) imports {t} ({names[layer_of(t)]})"
             for m, line, t in layer_violations(graph)]
    if found:
        pytest.fail("imports that point up kernelbench/'s layers (docs/architecture.md):\n" + "\n".join(found),
                    pytrace=False)
    unplaced = [m for m in graph if _in(m, "kernelbench") and m != "kernelbench" and layer_of(m) is None]
    assert not unplaced, f"kernelbench modules in no layer (add them to HARNESS_LAYERS): {unplaced}"


def test_child_imports_only_the_records_and_its_own_modules(project):
    graph, files = project
    found = [f"{files[m].relative_to(ROOT)}:{line} imports {t}" for m, edges in sorted(graph.items())
             if _in(m, "kernelbench.harness.child") for t, line in sorted(edges.items())
             if not any(t == p or (p != "kernelbench" and _in(t, p)) for p in CHILD_MAY_IMPORT)]
    if found:
        pytest.fail("the sandboxed child imports only protocol, the task records and its own modules:\n"
                    + "\n".join(found), pytrace=False)


def test_nothing_outside_the_child_imports_its_entry_points(project):
    graph, files = project
    found = [f"{files[m].relative_to(ROOT)}:{line} imports {t}" for m, edges in sorted(graph.items())
             if not _in(m, "kernelbench.harness.child") for t, line in sorted(edges.items()) if t in CHILD_ENTRY_POINTS]
    if found:
        pytest.fail("the child's entry points run in the child only:\n" + "\n".join(found), pytrace=False)


@pytest.mark.parametrize("path", sorted(SPINE_ROOTS))
def test_spine_is_measured_and_within_its_budget(project, path):
    graph, files = project
    spine = closure(graph, SPINE_ROOTS[path])
    lines = {m: _lines(files[m]) for m in spine}
    assert "kernelbench.harness.evaluate" in spine and "kernelbench.harness.child.timing" in spine, sorted(spine)
    most_modules, most_lines = SPINE_BUDGET[path]
    too_long = [f"{files[m].relative_to(ROOT)}: {n} lines" for m, n in sorted(lines.items()) if n > MAX_LINES]
    if too_long:
        pytest.fail(f"{path}: modules on the spine over {MAX_LINES} lines:\n" + "\n".join(too_long), pytrace=False)
    assert len(spine) <= most_modules and sum(lines.values()) <= most_lines, (
        f"{path}: the spine reaches {len(spine)} modules, {sum(lines.values())} lines (budget {most_modules}, "
        f"{most_lines}):\n" + "\n".join(f"  {files[m].relative_to(ROOT)}: {n}" for m, n in sorted(lines.items())))


FILE_REASON = "# Imports inside functions:"
"""A module whose imports inside functions share one reason says it once, on a line of its own at the top."""


def unexplained_inner_imports(path: Path) -> list[int]:
    """Lines of imports inside functions with no why: neither a comment on the line, nor a comment line just
    above it (or above the run of import lines it belongs to), nor the module's FILE_REASON line."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if any(line.startswith(FILE_REASON) for line in lines):
        return []
    tree = ast.parse(text, str(path))
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or "#" in lines[node.lineno - 1]:
                continue
            above = node.lineno - 2
            while above >= 0 and lines[above].strip().startswith(("import ", "from ")) or \
                    (above >= 0 and not lines[above].strip()):
                above -= 1
            if above < 0 or not lines[above].strip().startswith("#"):
                found.append(node.lineno)
    return sorted(set(found))


def test_inner_import_reader_wants_a_reason(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    import json\n\n\ndef g():\n    # why: light to import\n"
                                   "    import torch\n    import numpy\n\n\ndef h():\n    import os  # why\n")
    assert unexplained_inner_imports(tmp_path / "m.py") == [2]
    (tmp_path / "m.py").write_text(f"{FILE_REASON} the CLI starts without torch\n" + "def f():\n    import json\n")
    assert unexplained_inner_imports(tmp_path / "m.py") == []


def test_imports_sit_at_the_top_unless_a_comment_says_why(project):
    _, files = project
    found = [f"{path.relative_to(ROOT)}:{line}" for module, path in sorted(files.items())
             if not path.relative_to(ROOT).as_posix().startswith(SIZE_EXEMPT + ("kernelbench/tasks/family_affine/",))
             for line in unexplained_inner_imports(path)]
    if found:
        pytest.fail(f"{len(found)} imports inside functions without a why (move them to the top of the module, or say "
                    f"why on the line, the line above, or once as `{FILE_REASON} ...`):\n" + "\n".join(found),
                    pytrace=False)
