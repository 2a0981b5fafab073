"""The package's imports point down (docs/development.md, "Layers"): read from the source,
every import of one `ckpt_jax` module by another, at module level or inside a function, forms
a graph without a circle; only the top floors (`ckpt_jax.cli`, `ckpt_jax.experiments`,
`ckpt_jax.reproduce`) import the package itself; and at most two imports for annotations only
(under ``if TYPE_CHECKING:``) point back up."""

import ast
from pathlib import Path

import ckpt_jax

ROOT = Path(ckpt_jax.__file__).parent
TOP_FLOORS = ("ckpt_jax.cli", "ckpt_jax.experiments", "ckpt_jax.reproduce", "ckpt_jax.__main__")
MAX_TYPE_ONLY_CLIMBS = 2


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path):
    """``(target module, type only)`` of every import in module ``name`` of the package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    type_only = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            type_only.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not source.startswith("ckpt_jax"):
                continue
            for alias in node.names:  # `from . import loop` names a module; `from . import Fleet` the package
                target = f"{source}.{alias.name}"
                yield (target if target in MODULES else source), id(node) in type_only
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ckpt_jax"):
                    yield alias.name, id(node) in type_only


def _graph():
    runtime, type_only = {name: set() for name in MODULES}, []
    for name, path in MODULES.items():
        for target, annotation in _imports(name, path):
            if target == name or target not in MODULES:
                continue
            if annotation:
                type_only.append((name, target))
            else:
                runtime[name].add(target)
    return runtime, type_only


def _reaches(graph, start: str, goal: str) -> list | None:
    """A path of imports from ``start`` to ``goal``, or None."""
    stack, seen = [(start, [start])], {start}
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph[node]):
            if nxt == goal:
                return path + [nxt]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def _below_the_package(graph):
    """The graph without the package's own `__init__` (its namespace imports every floor)."""
    return {name: {t for t in targets if t != "ckpt_jax"} for name, targets in graph.items() if name != "ckpt_jax"}


def test_only_the_top_floors_import_the_package_itself():
    runtime, _ = _graph()
    offenders = sorted(
        name for name, targets in runtime.items() if "ckpt_jax" in targets and not name.startswith(TOP_FLOORS)
    )
    assert offenders == [], (
        f"these modules import ckpt_jax itself (import from the module that defines the name): {offenders}"
    )


def test_imports_form_no_circle():
    graph = _below_the_package(_graph()[0])
    circles = []
    for name in sorted(graph):
        for target in sorted(graph[name]):
            back = _reaches(graph, target, name)
            if back is not None:
                circles.append(" -> ".join([name] + back))
    assert circles == [], "imports that close a circle:\n" + "\n".join(circles[:10])


def test_at_most_two_type_only_imports_point_up():
    runtime, type_only = _graph()
    graph = _below_the_package(runtime)
    climbs = [(a, b) for a, b in type_only if b in graph and _reaches(graph, b, a) is not None]
    assert len(climbs) <= MAX_TYPE_ONLY_CLIMBS, f"type-only imports that point back up: {climbs}"


def test_the_graph_is_read():
    # The checks above must see the package's real imports: a few known arrows.
    runtime, type_only = _graph()
    assert "ckpt_jax._loops.driver" in runtime["ckpt_jax._simulate"]
    assert "ckpt_jax._loops.general" in runtime["ckpt_jax._loops.driver"]
    assert "ckpt_jax.labelled" in runtime["ckpt_jax._observe"]  # inside a method
    assert ("ckpt_jax._rates", "ckpt_jax._params") in type_only
