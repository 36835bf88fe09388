"""app/ is layered: web -> jobs -> points and assessment -> caches, database, operations -> the
root modules (config, extensions, models), never upward. Inside assessment, its rooms are
layered too: work (the root modules) -> report -> sources -> grid -> place -> registers, and
every room may use errors.py, which uses none of them.

An AST walk over every module resolves each import (absolute or relative, at module level
or inside a function) to the package it lands in and checks it against ALLOWED. create_app()
in app/__init__.py is the composition root and may import anything.
"""

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parent.parent / "app"

# Which packages each package may import from. "root" is app's own modules (config,
# extensions, models): what every package uses.
BELOW = {"caches", "database", "operations", "root"}
# The assessment package's rooms; "assessment" alone is its root (work.py, __init__.py).
ROOMS = ("registers", "place", "grid", "sources", "report", "errors")
ASSESSMENT = {"assessment"} | {f"assessment.{room}" for room in ROOMS}
ALLOWED = {
    "web": {"web", "jobs", "points"} | ASSESSMENT | BELOW,
    # The job machinery knows its work only through app/jobs/work.py's contract.
    "jobs": {"jobs", "points"} | BELOW,
    "points": {"points", "database", "operations", "root"},
    "assessment": ASSESSMENT | {"caches", "operations", "root"},
    "assessment.report": {"assessment.report", "assessment.sources", "assessment.grid"}
    | {"assessment.place", "assessment.registers", "assessment.errors", "caches", "root"},
    "assessment.sources": {"assessment.sources", "assessment.grid", "assessment.place"}
    | {"assessment.registers", "assessment.errors", "caches", "root"},
    "assessment.grid": {"assessment.grid", "assessment.place", "assessment.registers"}
    | {"assessment.errors", "root"},
    "assessment.place": {"assessment.place", "assessment.registers", "assessment.errors"}
    | {"caches", "root"},
    "assessment.registers": {"assessment.registers", "assessment.errors", "root"},
    "assessment.errors": {"assessment.errors", "root"},
    "caches": {"caches", "database", "root"},
    "database": {"database", "root"},
    "operations": {"operations", "root"},
    "root": {"root"},
}


PACKAGES = {"app"} | {
    f"app.{name}" for name in ALLOWED if name not in ("root", "assessment.errors")
}


def layer_of(module: str) -> str:
    """Return the layer of a dotted module name under app ("app.jobs.runner" -> "jobs")."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "assessment" and parts[2] in ROOMS:
        return f"assessment.{parts[2]}"
    if len(parts) > 1 and parts[1] in ALLOWED and parts[1] != "root":
        return parts[1]
    return "root"


def module_name(path: Path) -> str:
    rel = path.relative_to(APP.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def runtime_nodes(tree: ast.AST):
    """Yield every node of tree but those under `if TYPE_CHECKING:` (never run)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            yield from (n for child in node.orelse for n in [child, *runtime_nodes(child)])
            continue
        yield node
        yield from runtime_nodes(node)


def imported_modules(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Return (line, dotted name) for every import of an app module in source."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "app"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "app":
                continue
            if node.module is None or target in PACKAGES:
                # `from . import ledger`, `from ..points import billing`: the names are modules.
                found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, target))
    return found


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """Describe every import in source that reaches a layer its own may not import."""
    own = layer_of(module)
    return [
        f"{module}:{line} imports {target} ({own} may not import {layer_of(target)})"
        for line, target in imported_modules(source, module, is_package)
        if layer_of(target) not in ALLOWED[own]
    ]


def test_every_import_flows_downward():
    problems = []
    for path in sorted(APP.rglob("*.py")):
        if path == APP / "__init__.py":
            continue  # create_app() wires every layer together
        name = module_name(path)
        problems += violations(path.read_text(), name, path.name == "__init__.py")
    assert problems == []


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("app.points.ledger", "from ..jobs import transitions"),
        ("app.points.billing", "from app.web.errors import MESSAGES"),
        ("app.jobs.runner", "def f():\n    from ..web import poll"),
        ("app.assessment.work", "from ..points import ledger"),
        ("app.operations.failpoints", "from ..jobs import runner"),
        ("app.models", "import app.points.ledger"),
        ("app.models", "from .database import dbretry"),
        ("app.database.dbretry", "from ..operations import metrics"),
        ("app.caches.sharedflight", "from ..operations import alerts"),
        ("app.assessment.work", "from ..database import dbretry"),
        ("app.points.billing", "from ..caches import singleflight"),
        # inside assessment: upward and sideways between its rooms
        ("app.assessment.place.resolver", "from ..sources import portal"),
        ("app.assessment.registers.outlines", "from ..report.analysis import LAYERS"),
        ("app.assessment.registers.postal", "from ..place.gazetteer import gazetteer"),
        ("app.assessment.sources.portal", "from ..report import provenance"),
        ("app.assessment.sources.http", "from ..work import run_assessment"),
        ("app.assessment.report.analysis", "from .. import work"),
        ("app.assessment.errors", "from .place.area import Area"),
        ("app.assessment.place.area", "import app.assessment.grid.tiles"),
        ("app.assessment.grid.zones", "from ..sources import portal"),
        ("app.assessment.grid.tiles", "from ..report.maps import MAP_SIZE"),
    ],
)
def test_an_upward_import_is_caught(module, source):
    assert violations(source, module)


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("app.web.assessments", "from ..jobs import pipeline\nfrom . import paging"),
        (
            "app.jobs.views",
            "from ..points.billing import Billing\nfrom ..operations import failpoints",
        ),
        ("app.points.ledger", "from ..operations import failpoints\nfrom ..extensions import db"),
        ("app.caches.sharedflight", "from ..database import dbretry\nfrom .singleflight import C"),
        ("app.assessment.work", "from ..caches.singleflight import CacheStats"),
        ("app.assessment.report.analysis", "from ..sources.portal import ZONE_DATASETS"),
        ("app.assessment.sources.jshis", "from ..place.sampling import mesh250"),
        ("app.assessment.place.resolver", "from ..errors import PlaceNotFound"),
        ("app.assessment.place.point", "from ..registers import addresses, outlines"),
        ("app.assessment.errors", "if TYPE_CHECKING:\n    from .place.area import Area"),
        ("app.web.i18n", "from ..assessment.errors import Named"),
    ],
)
def test_a_downward_import_passes(module, source):
    assert violations(source, module) == []


def import_graph() -> dict[str, set[str]]:
    """Return every app module and the app modules it imports (at any depth of its code)."""
    sources = {module_name(path): path for path in sorted(APP.rglob("*.py"))}
    return {
        name: {
            target
            for _, target in imported_modules(path.read_text(), name, path.name == "__init__.py")
            if target in sources and target != name
        }
        for name, path in sources.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return one path for each circle of imports in graph (a depth-first walk)."""
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append(path[path.index(node) :] + [node])
        elif node not in done:
            for target in sorted(graph.get(node, ())):
                visit(target, path + [node])
            done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return found


def test_no_import_circle():
    # A package's __init__ re-exporting its modules is no circle: only a module that comes
    # back to itself through the modules it imports is.
    assert cycles(import_graph()) == []


def test_an_import_circle_is_caught():
    # http.py and upstream.py imported each other before the rooms were laid out.
    graph = {
        "app.assessment.sources.http": {"app.assessment.sources.upstream"},
        "app.assessment.sources.upstream": {"app.assessment.sources.http"},
    }
    assert cycles(graph) == [[*graph, "app.assessment.sources.http"]]
