"""The static checks' reading of a candidate: its parsed tree, what each name is bound to, the literal text
of its kernel sources, the calls that compile kernels, and C/C++ text without its comments.

Nothing here decides a verdict: the rules (`kernelbench.harness.static_checks`, each with its Why / Covers /
Not covered) read a `Source` and flag it. The candidate is never executed.
"""

from __future__ import annotations

import ast
import re

C_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)


def strip_c_comments(text: str) -> str:
    """Splice `\\`-newlines (before tokenising, as the compiler does) and drop comments, keeping string literals."""
    text = text.replace("\\\r\n", "").replace("\\\n", "")
    return C_TOKENS.sub(lambda m: " " if m.group(0).startswith("/") else m.group(0), text)


class Source:
    """The parsed candidate plus what several rules need: import bindings, name assignments, C++ texts."""

    def __init__(self, tree: ast.Module, device: str):
        self.tree, self.device = tree, device
        self.nodes = list(ast.walk(tree))
        self.imports: dict[str, str] = {}    # local name -> dotted path it is bound to
        self.assigned: dict[str, ast.expr] = {}
        self.found: dict[str, str] = {}     # flag -> first reason
        self.warnings: dict[str, str] = {}
        for n in self.nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    self.imports[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                for a in n.names:
                    self.imports[a.asname or a.name] = f"{n.module}.{a.name}"
            elif isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                self.assigned[n.targets[0].id] = n.value
        for _ in range(2):  # aliases of modules: `t = torch` then `t.allclose = ...`
            for name, value in self.assigned.items():
                q = self.qualname(value)
                if q and name not in self.imports:
                    self.imports[name] = q
        self.statement_strings = {id(n.value) for n in self.nodes
                                  if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}

    def qualname(self, node: ast.AST) -> str | None:
        """Dotted path of a name or attribute chain rooted in an import (`tu.load_inline` -> full path)."""
        if isinstance(node, ast.Name):
            return self.imports.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualname(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def fold(self, node: ast.AST | None, depth: int = 0) -> str | None:
        """Literal text of an expression, or None when any part is computed at run time."""
        if node is None:
            return ""
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
            return str(node.value)
        if isinstance(node, ast.Name) and depth < 8 and node.id in self.assigned:
            return self.fold(self.assigned[node.id], depth + 1)
        parts = None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            parts = [node.left, node.right]
        elif isinstance(node, (ast.List, ast.Tuple, ast.JoinedStr)):
            parts = node.elts if not isinstance(node, ast.JoinedStr) else node.values
        elif isinstance(node, ast.FormattedValue):
            parts = [node.value]
        if parts is None:
            return None
        texts = [self.fold(p, depth + 1) for p in parts]
        if any(t is None for t in texts):
            return None
        return ("\n" if isinstance(node, (ast.List, ast.Tuple)) else "").join(texts)

    def flag(self, rule: str, reason: str, node: ast.AST | None = None) -> None:
        where = f" (line {node.lineno})" if node is not None and hasattr(node, "lineno") else ""
        self.found.setdefault(f"static:{rule}", reason + where)


def last_name(node: ast.AST) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def call_arg(call: ast.Call, pos: int, kw: str) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == kw:
            return k.value
    return call.args[pos] if len(call.args) > pos else None


def kernel_sources(src: Source) -> list[tuple[ast.Call, str, list[ast.expr | None]]]:
    """Calls that compile custom kernels: (call, kind, source-text arguments)."""
    out = []
    for n in src.nodes:
        if isinstance(n, ast.Call):
            q, last = src.qualname(n.func) or "", last_name(n.func)
            if last == "load_inline" or q.endswith("cpp_extension.load_inline"):  # a renamed alias too
                out.append((n, "load_inline", [call_arg(n, 1, "cpp_sources"), call_arg(n, 2, "cuda_sources")]))
            elif last in ("RawModule", "RawKernel") and (q.startswith("cupy") or not q):
                out.append((n, last, [call_arg(n, 0, "code")]))
    return out


BODY_OPEN = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?\{")


def has_function_body(cpp: str) -> bool:
    """Whether some function in `cpp` has a body holding a statement: a `) {` whose matching `}` encloses a
    `;` at any depth (a first statement such as `auto y = torch::empty({1}, x.options());` holds braces)."""
    for m in BODY_OPEN.finditer(cpp):
        depth = 0
        for ch in cpp[m.end() - 1:]:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    break
            elif ch == ";":
                return True
    return False
