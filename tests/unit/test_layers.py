"""The package's layering (docs/DESIGN.md §2), read from the source: no module imports itself
through others, imports point down the drawing's rows, and the test tree mirrors the package.

Failure mode this guards against: a layer that quietly imports one above it. Python tolerates a
loop closed by an import inside a function, so nothing fails when one appears; it fails later,
as a partly initialised module or a process (the planner, ``tiering status``) that loads Spark
or the writers it was drawn without. Every import counts: at module level, inside functions and
under ``TYPE_CHECKING``, relative ones resolved. ``from P import n`` reads ``P`` (and ``P.n``
when that is a module); ``import P.m`` names ``P.m``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "tiering"

#: DESIGN §2's drawing, top row first: a unit (``name/`` a package, ``name.py`` a module) imports
#: units of its own row and of the rows below, never above. A new module joins its package's row.
# fmt: off
ROWS: tuple[tuple[str, ...], ...] = (
    ("cli.py", "submit.py", "jobs/", "resources/"),
    ("job/", "warmup.py", "demo/"),
    ("round/",),
    ("source.py", "writers/", "observability.py", "ops/"),
    ("context.py",),
    ("coord/", "delta_log/", "lease/", "state/", "enumerator/"),
    ("objectstore/",),
    ("kvstore/", "fluss/"),  # fluss/: the Apache Fluss upstream, beside the reference store
    ("spark_version.py", "spark_python.py", "planning_process.py"),
    ("conf/", "errors.py", "epochs.py", "ports.py", "allocator.py", "extras.py", "failpoints.py", "children.py",
     "console.py", "atomic_file.py", "java.py", "__init__.py"),  # __init__.py: the package's own (its version)
)
# fmt: on

#: The upward edges DESIGN §2 names: to round/'s types, never to the round's code.
UPWARD: Mapping[tuple[str, str], str] = {
    ("tiering.observability", "tiering.round.outcome"): "the metrics read a round's outcome",
    ("tiering.observability", "tiering.round.table_states"): "the metrics label a failure by its cause",
    ("tiering.ops.status", "tiering.round.health"): "status reads the health file the round writes",
}

#: DESIGN §2: the stores' row imports the bottom row alone, and fluss/ kvstore/ (its seam, its retry policy).
STORES_IMPORT = {"kvstore/": ("kvstore/",), "fluss/": ("fluss/", "kvstore/")}

#: Modules below source.py and writers/ that read pyspark's package (a file in it, its version), never
#: its API: the planning process and ``tiering status`` run without a JVM (DESIGN §2).
PYSPARK_READERS: Mapping[str, str] = {
    "tiering.coord.embedded": "the ZooKeeper jars pyspark ships",
    "tiering.spark_version": "the version of the pyspark this process imports",
}

#: DESIGN §3's store seam: these units reach a KV store only through it, in store-neutral values
#: (a second store is a second implementation of the seam, never a second job).
SEAM_USERS = ("writers/", "delta_log/", "coord/", "enumerator/", "lease/")
#: Modules of other units held to the same rule: the round's committer and its deferred reports (the
#: resync, a reference-store command, still takes the client).
SEAM_MODULES = ("tiering.round.committer", "tiering.round.deferred")
SEAM = "tiering.kvstore.contract"

#: Test folders that test no one module or package but the pieces together.
CROSS_CUTTING: Mapping[str, str] = {
    "pipeline": "the whole job against real services, round after round",
    "failover": "drivers and group members killed and replaced",
    "cluster": "spark-submit on a standalone cluster",
    "monitoring": "deploy/monitoring/'s rules and the series the job exports",
    "packaging": "the built wheel in a fresh venv",
    "benchmarks": "the repository's benchmarks/ commands",
    "kvstore_contract": "one suite against every store behind the store seam (kvstore/, fluss/)",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _owner(name: str, modules: Mapping[str, Path]) -> str:
    """The module ``name`` is, or the innermost one holding it (``P.f``, a function of ``P``: ``P``)."""
    while name not in modules:
        name = name.rpartition(".")[0]
    return name


def _imported(name: str, path: Path, modules: Mapping[str, Path]) -> Iterator[str]:
    """Every module an import statement of ``name`` reads, relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            yield source
            yield from (f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in modules)


def _external(module: str) -> set[str]:
    """The top-level names of what ``module`` imports from outside the package."""
    return {t.split(".")[0] for t in _imported(module, _modules()[module], _modules())} - {"tiering"}


@cache
def _graph() -> dict[str, frozenset[str]]:
    """module -> the package's modules it imports (itself left out)."""
    modules = _modules()
    return {
        name: frozenset(_owner(t, modules) for t in _imported(name, path, modules) if t.split(".")[0] == "tiering")
        - {name}
        for name, path in modules.items()
    }


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    top = PACKAGE / parts[1]
    return f"{parts[1]}/" if top.is_dir() else f"{parts[1]}.py"


def _row(unit: str) -> int:
    """The unit's row, top first (an undrawn one counts as the top: the row test names it)."""
    return next((i for i, row in enumerate(ROWS) if unit in row), 0)


def _cycles(graph: Mapping[str, frozenset[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(component) > 1:
                found.append(_cycle_through(v, set(component), graph))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _cycle_through(start: str, component: set[str], graph: Mapping[str, frozenset[str]]) -> list[str]:
    """A path from ``start`` back to itself inside ``component`` (breadth first: the shortest)."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        step = []
        for v in frontier:
            for w in sorted(graph[v] & component):
                if w == start:
                    return [*paths[v], start]
                if w not in paths:
                    paths[w] = [*paths[v], w]
                    step.append(w)
        frontier = step
    raise AssertionError(f"{start} is in a component without a cycle through it")


def test_no_module_imports_itself_through_others():
    cycles = [" -> ".join(cycle) for cycle in _cycles(_graph())]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_every_unit_of_the_package_has_a_row():
    missing = sorted({_unit(m) for m in _graph()} - {u for row in ROWS for u in row})
    assert not missing, f"not in ROWS (nor in docs/DESIGN.md §2's drawing): {missing}"


def test_imports_point_down_the_rows():
    upward = sorted(
        f"{a} ({_unit(a)}) -> {b} ({_unit(b)})"
        for a, targets in _graph().items()
        for b in targets
        if _row(_unit(b)) < _row(_unit(a)) and (a, b) not in UPWARD
    )
    assert not upward, "imports pointing up docs/DESIGN.md §2's rows:\n" + "\n".join(upward)


def test_the_stores_import_only_the_bottom_row():
    bottom = set(ROWS[-1])
    wider = sorted(
        f"{a} -> {b}"
        for a, targets in _graph().items()
        if _unit(a) in STORES_IMPORT
        for b in targets
        if _unit(b) not in bottom and _unit(b) not in STORES_IMPORT[_unit(a)]
    )
    assert not wider, "the stores' row imports more than the bottom row (docs/DESIGN.md §2):\n" + "\n".join(wider)


def test_nothing_below_the_source_and_the_writers_imports_pyspark():
    below = _row("context.py")
    found = sorted(
        m for m in _graph() if _row(_unit(m)) >= below and "pyspark" in _external(m) and m not in PYSPARK_READERS
    )
    assert not found, f"pyspark imported below source.py and writers/ (docs/DESIGN.md §2): {found}"
    assert [m for m in PYSPARK_READERS if "pyspark" not in _external(m)] == [], "a named reader no longer reads it"


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _beside_the_seam(target: str) -> bool:
    """Whether ``target`` is a store's own module: the reference store's but its seam, or Fluss's."""
    reference = _within(target, "tiering.kvstore") and not _within(target, SEAM)
    return reference or _within(target, "tiering.fluss")


def test_the_lake_the_delta_log_coordination_planning_and_the_round_reach_a_store_only_through_its_seam():
    leaks = sorted(
        f"{a} -> {b}"
        for a, targets in _graph().items()
        if _unit(a) in SEAM_USERS or a in SEAM_MODULES
        for b in targets
        if _beside_the_seam(b)
    )
    assert not leaks, f"imports past the store seam ({SEAM}, docs/DESIGN.md §3):\n" + "\n".join(leaks)


def test_the_seam_rule_tells_the_seam_from_a_store():
    assert [t for t in (SEAM, f"{SEAM}.changes", "tiering.kvstoreish") if _beside_the_seam(t)] == []
    assert all(map(_beside_the_seam, ("tiering.kvstore.models", "tiering.kvstore.protocol", "tiering.fluss.store")))


def test_each_named_upward_edge_exists_and_status_reaches_no_writer():
    graph = _graph()
    assert [edge for edge in UPWARD if edge[1] not in graph[edge[0]]] == []
    reached: set[str] = set()
    frontier = {target for importer, target in UPWARD if importer == "tiering.ops.status"}
    while frontier:
        reached |= frontier
        frontier = {m for v in frontier for m in graph[v]} - reached
    assert sorted(m for m in reached if _unit(m) == "writers/" or "pyspark" in _external(m)) == []


def _reach(graph: Mapping[str, frozenset[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    reached: set[str] = set()
    frontier = set(graph[start])
    while frontier:
        reached |= frontier
        frontier = {m for v in frontier for m in graph[v]} - reached
    return reached


def test_the_operator_commands_read_and_draw_without_reaching_their_writes():
    graph = _graph()
    readers = ("tiering.ops.status", "tiering.ops.status_view", "tiering.ops.group")
    assert {reader: sorted(_reach(graph, reader) & {"tiering.ops.writes"}) for reader in readers} == dict.fromkeys(
        readers, []
    )


def test_the_cycle_check_names_the_loop_and_nothing_else():
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": frozenset({"b"}), "b": frozenset()}) == []


def test_an_import_inside_a_function_and_a_relative_one_are_read(tmp_path: Path):
    source = tmp_path / "merge.py"
    source.write_text(
        "from . import catalog\n"
        "from ..errors import ConfigError\n"
        "def f():\n"
        "    from tiering.kvstore.server import rows\n"
        "    import tiering.delta_log.lake\n"
    )
    modules = dict.fromkeys(["tiering.writers.catalog", "tiering.kvstore.server.rows"], tmp_path)
    assert sorted(_imported("tiering.writers.merge", source, modules)) == [
        "tiering.delta_log.lake",
        "tiering.errors",
        "tiering.kvstore.server",
        "tiering.kvstore.server.rows",
        "tiering.writers",
        "tiering.writers.catalog",
    ]


def test_every_test_folder_names_a_package_or_module():
    units = {_unit(m).rstrip("/").removesuffix(".py") for m in _graph()}
    folders = [f for kind in ("unit", "integration") for f in (ROOT / "tests" / kind).iterdir() if any(f.glob("*.py"))]
    strays = sorted(str(f.relative_to(ROOT)) for f in folders if f.name not in units and f.name not in CROSS_CUTTING)
    assert not strays, f"test folders that mirror no package or module of tiering/: {strays}"
