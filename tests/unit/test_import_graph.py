"""The shape of mappa's imports: no cycles, no import running up the layers (`LAYERS`, bottom first), and
the layers below the stages free of Ray and Prefect.

The graph is read from the source (every `import` statement, module-level and inside functions), so a
cycle hidden behind a function-level import counts as one. Importing `a.b.c` from outside package `a.b`
runs `a/b/__init__.py` first: that edge is in the graph too.
"""

import ast
from pathlib import Path

import mappa

PACKAGE = Path(mappa.__file__).parent
PURE_LAYERS = (
    "mappa.core",
    "mappa.envs",
    "mappa.coach",
    "mappa.trainer",
    "mappa.storage",
    "mappa.models",
    "mappa.reporting",
)
USES_PREFECT = ("mappa.reporting.progress",)  # a long stage's bar is a Prefect progress artifact
ORCHESTRATION = ("ray", "prefect")
LAYERS = (
    ("mappa", "mappa.core"),  # `mappa` itself: its version only
    ("mappa.models", "mappa.sandbox"),
    ("mappa.inference",),
    ("mappa.agents",),
    ("mappa.envs",),
    ("mappa.config",),
    ("mappa.storage",),
    ("mappa.coach", "mappa.trainer", "mappa.reporting", "mappa.run_log"),
    ("mappa.cluster",),
    ("mappa.resources",),
    ("mappa.preflight",),
    ("mappa.stages",),
    ("mappa.blame",),
    ("mappa.flows", "mappa.team"),
    ("mappa.cli",),
)
"""mappa's packages from the bottom up, read off today's imports: a module imports packages of its own layer
or below, never above (packages of one layer may import each other; modules never in a circle)."""
KNOWN_UPWARD: dict[tuple[str, str], str] = {}
"""The imports that run up today, (module, package) -> why: reported, not hidden. A new one fails the test;
one that is gone must leave this list."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(mappa module -> mappa modules it imports, mappa module -> top-level third-party packages)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    inner: dict[str, set[str]] = {}
    outer: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative import
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets.add(base)
                targets |= {f"{base}.{alias.name}" for alias in node.names}
        inner[name] = set()
        outer[name] = set()
        for target in targets:
            if target == "mappa" or target.startswith("mappa."):
                if target in modules:
                    inner[name].add(target)
                    inner[name] |= _outside_packages(name, target, modules)
            elif target:
                outer[name].add(target.split(".")[0])
        inner[name].discard(name)
    return inner, outer


def _outside_packages(importer: str, target: str, modules) -> set[str]:
    """The packages whose `__init__` importing `target` runs, other than the importer's own."""
    parts = target.split(".")
    found = set()
    for end in range(2, len(parts)):
        package = ".".join(parts[:end])
        if package in modules and not (importer == package or importer.startswith(package + ".")):
            found.add(package)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def test_mappa_has_no_import_cycles():
    inner, _ = import_graph()
    assert cycles(inner) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_core_envs_coach_and_trainer_reach_no_ray_and_no_prefect():
    inner, outer = import_graph()
    for module in inner:
        if not module.startswith(PURE_LAYERS) or module in USES_PREFECT:
            continue
        closure = reachable(inner, module)
        upward = sorted(m for m in closure if m.startswith(("mappa.stages", "mappa.flows")))
        assert not upward, f"{module} imports the pipeline's layers: {upward}"
        third = {pkg for m in closure for pkg in outer[m]}
        assert not third & set(ORCHESTRATION), f"{module} reaches {sorted(third & set(ORCHESTRATION))}"


def package_of(module: str) -> str:
    """`mappa` or the top package under it (`mappa.stages.score` -> `mappa.stages`)."""
    return ".".join(module.split(".")[:2])


def is_bare_package(module: str, inner: dict[str, set[str]]) -> bool:
    """A package whose `__init__` imports nothing of mappa: running it on the way in costs nothing."""
    init = PACKAGE.parent.joinpath(*module.split("."), "__init__.py")
    return init.is_file() and not inner[module]


def upward_imports(inner: dict[str, set[str]], layers=LAYERS) -> set[tuple[str, str]]:
    """(module, package) for each import of a package from a layer above the module's own."""
    level = {package: n for n, packages in enumerate(layers) for package in packages}
    found = set()
    for module, targets in inner.items():
        for target in targets:
            above = level[package_of(target)] > level[package_of(module)]
            if above and not is_bare_package(target, inner):
                found.add((module, package_of(target)))
    return found


def test_every_package_has_a_layer():
    inner, _ = import_graph()
    placed = {package for packages in LAYERS for package in packages}
    assert {package_of(module) for module in inner} <= placed, "add the new package to LAYERS"
    assert len(placed) == sum(len(packages) for packages in LAYERS), "a package is in two layers"


def test_no_import_runs_up_the_layers():
    inner, _ = import_graph()
    upward = upward_imports(inner)
    new = sorted(upward - KNOWN_UPWARD.keys())
    assert not new, f"imports running up the layers (LAYERS, bottom first): {new}"
    gone = sorted(KNOWN_UPWARD.keys() - upward)
    assert not gone, f"no longer imported upward: remove {gone} from KNOWN_UPWARD"


def test_the_layer_check_finds_an_import_running_up():
    inner = {"mappa.core.types": {"mappa.stages.score"}, "mappa.stages.score": {"mappa.core.types"}}
    layers = (("mappa.core",), ("mappa.stages",))
    assert upward_imports(inner, layers) == {("mappa.core.types", "mappa.stages")}
