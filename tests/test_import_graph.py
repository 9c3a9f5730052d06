"""The import graph of src/tailscope, built from the code: no cycle between modules or between packages, and
every arrow between packages allowed by the layer table of docs/architecture.md.

Every `import` and `from ... import` counts, at module level, inside functions and under TYPE_CHECKING
alike: a type-only arrow is still an arrow a reader has to follow. `from tailscope.a import b` is an arrow to
the module `tailscope.a.b` when b is a module, else to `tailscope.a`. A package is a directory directly
under src/tailscope (`analysis.causes` belongs to `analysis`); a module directly under src/tailscope is a
part of its own (`cli`, `errors`, ...).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "tailscope"
ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root.parent): p for p in sorted(root.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` is or is inside of (None outside tailscope)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The tailscope modules `module` imports anywhere in its file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, known)
                if target:
                    found.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                target = _resolve(f"{source}.{alias.name}", known) or _resolve(source, known)
                if target:
                    found.add(target)
    found.discard(module)
    return found


@functools.cache
def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)
    return {m: imports_of(m, p, known) for m, p in known.items()}


def part_of(module: str) -> str:
    """The part a module belongs to: its package directly under tailscope, or the module itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tailscope"


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    parts: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module == "tailscope":
            continue
        edges = parts.setdefault(part_of(module), set())
        edges.update(part_of(t) for t in targets if t != "tailscope" and part_of(t) != part_of(module))
    return parts


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a path a -> ... -> a) per strongly connected component with more than one member."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def strongconnect(v: str) -> None:  # Tarjan; the graphs are small (a few hundred nodes)
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(component)

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return [_cycle_in(sorted(c), graph) for c in components]


def _cycle_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the component's first member (breadth first inside the component)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph.get(v, ()) & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if w not in previous:
                    previous[w] = v
                    following.append(w)
        frontier = following
    return component


def layer_table(text: str) -> dict[str, set[str]]:
    """The `| part | may import |` table of docs/architecture.md: part -> the parts it may import."""
    table: dict[str, set[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^\|\s*`([\w]+)`\s*\|\s*([^|]*)\|", line)
        if m:
            allowed = set(re.findall(r"`([\w]+)`", m.group(2)))
            table[m.group(1)] = allowed
    return table


def _render(found: Iterable[list[str]]) -> str:
    return "\n".join(" -> ".join(c) for c in found)


def test_no_cycle_between_modules() -> None:
    found = cycles(module_graph())
    assert not found, f"import cycles between modules:\n{_render(found)}"


def test_no_cycle_between_packages() -> None:
    found = cycles(package_graph(module_graph()))
    assert not found, f"import cycles between packages:\n{_render(found)}"


def test_every_arrow_between_packages_is_allowed_by_the_architecture() -> None:
    table = layer_table(ARCHITECTURE.read_text())
    graph = module_graph()
    parts = package_graph(graph)
    unlisted = sorted(set(parts) - set(table))
    assert not unlisted, f"parts missing from docs/architecture.md's layer table: {', '.join(unlisted)}"
    wrong = []
    for part, targets in sorted(parts.items()):
        for target in sorted(targets - table[part]):
            culprits = sorted(
                f"{m} -> {t}"
                for m, ts in graph.items()
                if m != "tailscope" and part_of(m) == part
                for t in ts
                if t != "tailscope" and part_of(t) == target
            )
            wrong.append(f"{part} -> {target} ({'; '.join(culprits)})")
    assert not wrong, "arrows docs/architecture.md does not allow:\n" + "\n".join(wrong)


def test_the_layer_table_itself_has_no_cycle() -> None:
    table = layer_table(ARCHITECTURE.read_text())
    assert {"cli", "verbs", "report", "store"} <= set(table)  # the table was found and read
    found = cycles(table)
    assert not found, f"docs/architecture.md's layer table allows a cycle:\n{_render(found)}"


def test_the_graph_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    """The builder itself: an import inside a function and a relative one are arrows; a cycle is found."""
    pkg = tmp_path / "tailscope"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("def f():\n    from tailscope.b import y\n")
    (pkg / "b").mkdir()
    (pkg / "b" / "__init__.py").write_text("")
    (pkg / "b" / "y.py").write_text("from ..a import x\n")
    graph = module_graph(pkg)
    assert graph["tailscope.a.x"] == {"tailscope.b.y"}
    assert graph["tailscope.b.y"] == {"tailscope.a.x"}
    assert cycles(graph) == [["tailscope.a.x", "tailscope.b.y", "tailscope.a.x"]]
    assert cycles(package_graph(graph)) == [["a", "b", "a"]]
