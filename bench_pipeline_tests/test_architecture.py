"""The folder tree is the architecture: checks that keep it so, beside `lint-imports` in CI."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bench_pipeline"
ALLOWED_FLAT = {"__init__.py", "definitions.py", "lazy.py"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the bench_pipeline modules it imports, counting imports inside functions."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                # An import of a module (not of a name in it) is an edge to that module.
                if target in modules and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    WHITE, GREY, BLACK = 0, 1, 2
    color = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        color[node] = GREY
        stack.append(node)
        for dep in sorted(graph[node]):
            if color[dep] == GREY:
                return stack[stack.index(dep) :] + [dep]
            if color[dep] == WHITE and (found := visit(dep)):
                return found
        stack.pop()
        color[node] = BLACK
        return None

    for node in sorted(graph):
        if color[node] == WHITE and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_counting_function_level_imports() -> None:
    graph = import_graph()
    # A package's __init__ re-exporting its modules is not a cycle of design: drop the edge
    # from a module to its own package's __init__ (Python imports the package first anyway).
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_flat_modules_beside_the_packages() -> None:
    flat = {p.name for p in PACKAGE.glob("*.py")} - ALLOWED_FLAT
    assert not flat, f"modules outside a package: {sorted(flat)}"


def test_print_and_argparse_only_under_cli() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("cli/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                offenders.append(f"{rel}:{node.lineno} print()")
    assert not offenders, offenders


def test_lint_imports_passes() -> None:
    """The layers and forbidden contracts in pyproject.toml hold (CI runs it too)."""
    exe = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(exe), "--no-cache"], cwd=PACKAGE.parent, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0 broken" in proc.stdout
