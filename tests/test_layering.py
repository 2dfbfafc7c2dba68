"""The layers of proactflow/ hold: a subpackage imports only those below it (docs/layout.md).

Every import counts, at the top of a module or inside a function, type-checking ones included:
an import put off until a function runs is still a dependency a reader has to follow."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINKED = ("flows", "stages", "schemas", "cache", "suites")  # top-level folders, see pyproject

LAYERS = [
    "common",          # user errors, secrets redaction, reachability, gc, the PostgreSQL link
    "schemas",         # Arrow schemas of the stored tables
    "prefect_server",  # the Prefect API a command reports to, its temporary server
    "cache",           # artifact store and per-call cache
    "limits",          # limits shared across runs, processes and hosts
    "config",          # a run's settings, roles, generation settings, endpoints
    "providers",       # the edge to LLM providers
    "batches",         # provider batch APIs (--batch): adapters, the registry, the transport
    "suites",          # the seam a benchmark plugs into, the benchmarks, their data
    "stages",          # the generic stages and how they run their calls
    "run",             # running one evaluation
    "flows.wiring",    # one evaluation's stages wired, with Prefect or without
    "flows.evaluate",  # the `evaluate` and `rejudge` flows
    "results",         # reading results: a store's evaluations and their identity
    "results.viewer",  # the per-trigger viewer
    "results.report",  # the report's pages and exports
    "results.history",  # the sweeps' history of nights, its pages and findings
    "results.upkeep",  # imports, re-judging many, gc
    "sweeps",          # many evaluations: sweep file, process groups, deployments
    "flows.sweep",     # the `sweep` flow
    "cli",             # the `proactflow` command
]
"""Bottom first: a module may import its own layer's modules and those of layers above it in
this list, never one below."""

UPWARD_KNOWN = {
    ("proactflow.config.generation", "proactflow.suites"):
        "a role's default generation settings are its suite's protocol's",
}
"""Imports that point up today, each put off until a function runs; none may be added (a sweep's
report pages, once written by the suites themselves, are results/report/sweeps.py's since issue
#38)."""


def package_modules() -> dict[str, Path]:
    """Every module of the installed package, by dotted name, with its file."""
    modules = {}
    sources = [(ROOT / "proactflow", "proactflow")]
    sources += [(ROOT / folder, f"proactflow.{folder}") for folder in LINKED]
    for folder, prefix in sources:
        for path in folder.rglob("*.py"):
            relative = path.relative_to(folder).with_suffix("").parts
            if relative[0] in LINKED and folder.name == "proactflow":
                continue  # a link: read from the top-level folder
            parts = [p for p in relative if p != "__init__"]
            modules[".".join([prefix, *parts])] = path
    return modules


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The proactflow modules a module imports (`from x import y` counts as y when y is a
    module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in known
                          else target)
    return {module for module in found if module in known}


def layer_of(module: str) -> int | None:
    rest = module.removeprefix("proactflow.")
    matches = [i for i, layer in enumerate(LAYERS) if rest == layer or rest.startswith(layer + ".")]
    return max(matches, key=lambda i: len(LAYERS[i])) if matches else None


def upward_imports() -> set[tuple[str, str]]:
    modules = package_modules()
    known = set(modules)
    upward = set()
    for name, path in modules.items():
        here = layer_of(name)
        if here is None:
            continue  # the package's own __init__ and flows/__init__: checked below
        for imported in imports_of(name, path, known):
            there = layer_of(imported)
            if there is not None and there > here:
                upward.add((name, imported))
    return upward


def test_every_module_belongs_to_a_layer():
    unplaced = {name for name in package_modules() if layer_of(name) is None}
    # The package's __init__ and flows/__init__ hold only their docstrings (and a version).
    assert unplaced == {"proactflow", "proactflow.flows"}
    assert imports_of("proactflow.flows", ROOT / "flows" / "__init__.py",
                      set(package_modules())) == set()


def test_imports_only_point_down():
    upward = upward_imports()
    new = sorted(upward - set(UPWARD_KNOWN))
    assert not new, "imports pointing up a layer (see docs/layout.md): " + ", ".join(
        f"{importer} -> {imported}" for importer, imported in new)
    gone = sorted(set(UPWARD_KNOWN) - upward)
    assert not gone, f"no longer imported, remove from UPWARD_KNOWN: {gone}"


def test_no_two_modules_need_each_other():
    """No cycle among modules either (the layers alone allow one within a subpackage), apart
    from those the known upward imports close."""
    modules = package_modules()
    known = set(modules)
    graph = {name: imports_of(name, path, known) - {name} for name, path in modules.items()}
    for importer, imported in UPWARD_KNOWN:
        graph[importer].discard(imported)
    cycles = [component for component in strongly_connected(graph) if len(component) > 1]
    assert not cycles, f"modules that import each other: {cycles}"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, iteratively (a deep import chain must not hit the recursion
    limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
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
                components.append(sorted(component))
    return components


def upward_table() -> str:
    """docs/layout.md's table of the imports that point up, as UPWARD_KNOWN gives them."""
    return "".join(f"| `{importer.removeprefix('proactflow.')}` | "
                   f"`{imported.removeprefix('proactflow.')}` | {why} |\n"
                   for (importer, imported), why in sorted(UPWARD_KNOWN.items()))


def test_the_layout_page_lists_the_upward_imports_this_test_knows():
    page = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    start = page.index("<!-- upward imports: generated from tests/test_layering.py")
    start = page.index("|---|---|---|\n", start) + len("|---|---|---|\n")
    end = page.index("<!-- end of upward imports -->", start)
    assert page[start:end] == upward_table(), \
        "docs/layout.md's upward imports differ from UPWARD_KNOWN: paste\n" + upward_table()


SUITE_PACKAGES = sorted(path.parent.name for path in (ROOT / "suites").glob("*/__init__.py"))
"""The benchmarks' own folders under suites/."""
SUITE_NAMES = {"proactbench", "proactiveagent", "proactiveagent-calibration",
               "proactivebench-mllm", "proactivebench-video"}
"""What --suite says for each built-in suite (suites/__init__.py)."""
DEFAULT_SUITE_AT = "proactflow.config.generation"
"""Where the configuration names the default suite: the one name allowed outside suites/."""

SUITE_NAMED_KNOWN: dict[str, str] = {}
"""Modules outside suites/ that still import a suite's package or say a suite's name: none since
issue #38 (each went behind the seam, suites/base.py's declarations); none may be added."""


def suite_naming(name: str, path: Path) -> list[str]:
    """What in a module imports a suite's own package or says a suite's name as a value
    (a comparison, a choice, a constant; not prose that mentions it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level and target.split(".")[0] == "suites":
                target = "proactflow." + target
            parts = target.split(".")
            if parts[:2] == ["proactflow", "suites"] and len(parts) > 2 \
                    and parts[2] in SUITE_PACKAGES:
                found.append(f"imports {target}")
            elif parts[:2] == ["proactflow", "suites"] and len(parts) == 2 or \
                    node.level and target in ("suites", ""):
                found += [f"imports suites.{alias.name}" for alias in node.names
                          if alias.name in SUITE_PACKAGES]
        elif isinstance(node, ast.Import):
            found += [f"imports {alias.name}" for alias in node.names
                      if alias.name.split(".")[:2] == ["proactflow", "suites"]
                      and len(alias.name.split(".")) > 2
                      and alias.name.split(".")[2] in SUITE_PACKAGES]
        elif isinstance(node, ast.Constant) and node.value in SUITE_NAMES:
            found.append(f"says {node.value!r}")
    return found


def test_no_module_outside_suites_names_a_suite():
    """The core asks a suite through the seam: it never imports a benchmark's own folder nor
    tells suites apart by name (the default suite's name in the configuration aside)."""
    naming = {}
    for name, path in package_modules().items():
        if name.startswith("proactflow.suites") or name == DEFAULT_SUITE_AT:
            continue
        found = suite_naming(name, path)
        if found:
            naming[name] = found
    new = {name: found for name, found in naming.items() if name not in SUITE_NAMED_KNOWN}
    assert not new, f"modules outside suites/ naming a suite: {new}"
    gone = sorted(set(SUITE_NAMED_KNOWN) - set(naming))
    assert not gone, f"no longer naming a suite, remove from SUITE_NAMED_KNOWN: {gone}"


MOST_MODULES_IN_A_FOLDER = 15


def test_no_folder_of_the_package_holds_more_than_fifteen_modules():
    counts: dict[Path, int] = {}
    for path in package_modules().values():
        if path.name != "__init__.py":
            counts[path.parent] = counts.get(path.parent, 0) + 1
    crowded = {str(folder.relative_to(ROOT)): n for folder, n in counts.items()
               if n > MOST_MODULES_IN_A_FOLDER}
    assert not crowded, f"split these folders into rooms by concept: {crowded}"
