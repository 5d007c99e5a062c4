"""No import cycles among gmlp-check's modules, counting the imports inside functions: a cycle
through a lazy import still breaks whoever first imports the wrong end of it at run time."""

import ast
from pathlib import Path

from gmlp_check.repro_embed import type_checking_only

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "gmlp_check"
# folder -> the package it installs as (setup.py)
FOLDERS = {
    "gmlp_check": NAMESPACE,
    "refimpl": f"{NAMESPACE}.refimpl",
    "fused": f"{NAMESPACE}.fused",
    "lint": f"{NAMESPACE}.lint",
    "bench": f"{NAMESPACE}.bench",
}


def module_files() -> dict[str, Path]:
    modules = {}
    for folder, package in FOLDERS.items():
        for path in (REPO / folder).rglob("*.py"):
            if "fixtures" in path.relative_to(REPO).parts:
                continue
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def imported(name: str, path: Path, node: ast.AST, modules: set[str]) -> set[str]:
    """The project modules an import statement names (a submodule where it names one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    if isinstance(node, ast.Import):
        bases = [alias.name for alias in node.names]
        names: list[str] = []
    else:
        if node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        bases = [base]
        names = [alias.name for alias in node.names]
    for base in bases:
        for name_ in names or [None]:
            candidate = f"{base}.{name_}" if name_ else base
            while candidate and candidate not in modules:
                candidate = candidate.rpartition(".")[0]
            if candidate:
                targets.add(candidate)
    return targets


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        hidden = type_checking_only(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in hidden:
                edges |= imported(name, path, node, set(files))
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path of modules, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for succ in sorted(graph.get(node, ())):
            if state.get(succ) == 1:
                return [*path[path.index(succ) :], succ]
            if succ not in state and (cycle := visit(succ)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_graph_sees_imports_inside_functions():
    graph = import_graph()
    # fused/__init__.py imports .mlp only inside __getattr__.
    assert "gmlp_check.fused.mlp" in graph["gmlp_check.fused"]
    assert len(graph) > 100


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_imports_for_type_checkers_only_are_no_edges():
    tree = ast.parse("import a\nif TYPE_CHECKING:\n    import b\ndef f():\n    import c\n")
    hidden = type_checking_only(tree)
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import)]
    assert sorted(n.names[0].name for n in imports if id(n) not in hidden) == ["a", "c"]


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
