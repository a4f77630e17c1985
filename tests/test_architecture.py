"""The package's layering, read from its source with ``ast`` (imports inside functions included).

Rooms, from the bottom up (docs/ARCHITECTURE.md); a module imports only from its own room and those below it:

* ``core``: ``dandelion/`` itself (geometry, warps, pooling, models, metrics, forecast, checkpoints, runtime);
* ``solvers``: ``dandelion.solvers`` (may import the core);
* ``datasets``: ``dandelion.datasets`` (the core and the solvers);
* ``jobs``: ``dandelion.training``, ``dandelion.evaluation``, ``dandelion.export``, ``dandelion.reporting``,
  ``dandelion.cli`` and the notebook facade ``dandelion.api`` (everything below);
* ``benchmarks``: ``dandelion.benchmarks``, the benchmark protocol (everything); nothing outside it imports it.

Also: no import cycle; no module imports the facade ``dandelion.api``; hydra and omegaconf are imported only by the
command-line layer (``dandelion.cli``) and the benchmark protocol, so that the Python API (training, evaluation,
export, reporting) runs without either.

The checker is tested on small synthetic packages first, so that a rule that can never fail is caught.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FACADE = "dandelion.api"
ORDER = ("core", "solvers", "datasets", "jobs", "benchmarks")
ROOMS = {
    "dandelion.solvers": "solvers",
    "dandelion.datasets": "datasets",
    "dandelion.training": "jobs",
    "dandelion.evaluation": "jobs",
    "dandelion.export": "jobs",
    "dandelion.reporting": "jobs",
    "dandelion.cli": "jobs",
    FACADE: "jobs",
    "dandelion.benchmarks": "benchmarks",
}
#: third-party top-level package -> the modules allowed to import it
RESTRICTED = {
    "hydra": ("dandelion.cli", "dandelion.benchmarks"),
    "omegaconf": ("dandelion.cli", "dandelion.benchmarks"),
}


# ---------------------------------------------------------------------------------------------- the checker
def package_dirs(root: Path) -> dict[str, Path]:
    """``{package name: folder}`` from ``pyproject.toml``'s ``[tool.setuptools.package-dir]``."""
    cfg = tomllib.loads((root / "pyproject.toml").read_text())
    return {name: root / folder for name, folder in cfg["tool"]["setuptools"]["package-dir"].items()}


def module_files(dirs: dict[str, Path]) -> dict[str, Path]:
    """``{module name: file}`` of every ``.py`` file under the package folders (``__init__`` names its package)."""
    out = {}
    for pkg, folder in dirs.items():
        for f in sorted(folder.rglob("*.py")):
            parts = list(f.relative_to(folder).with_suffix("").parts)
            if any(p.startswith(".") or p == "__pycache__" for p in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = f
    return out


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package modules that module ``name`` (file ``path``) imports, anywhere in the file."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:  # `import a.b.c` of a non-module attribute: the longest module prefix
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package modules it imports, for every module of the package rooted at ``root``."""
    files = module_files(package_dirs(root))
    names = set(files)
    return {m: imports_of(m, f, names) for m, f in files.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan 1972), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def room_of(module: str, rooms: dict[str, str] = ROOMS) -> str:
    """The room of a package module: the longest matching prefix of ``rooms``, else ``core``."""
    best = max((p for p in rooms if _in(module, p)), key=len, default=None)
    return rooms[best] if best else "core"


def layer_violations(graph: dict[str, set[str]], rooms: dict[str, str] = ROOMS, facade: str = FACADE) -> list[str]:
    """Edges breaking the layering: an import of a room above the importer's, or of the facade."""
    bad = []
    for m, deps in sorted(graph.items()):
        level = ORDER.index(room_of(m, rooms))
        for d in sorted(deps):
            if ORDER.index(room_of(d, rooms)) > level:
                bad.append(f"{room_of(m, rooms)} module {m} imports {room_of(d, rooms)} module {d}")
            if _in(d, facade) and m != facade:
                bad.append(f"{m} imports the facade {d}")
    return bad


def third_party_imports(path: Path) -> set[str]:
    """Top-level names of the absolute imports in a file (anywhere in it)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def restricted_imports(files: dict[str, Path], restricted: dict = RESTRICTED) -> list[str]:
    """Imports of a restricted third-party package by a module outside its allowed prefixes."""
    bad = []
    for m, f in sorted(files.items()):
        for pkg in sorted(third_party_imports(f) & set(restricted)):
            if not any(_in(m, p) for p in restricted[pkg]):
                bad.append(f"{m} imports {pkg}")
    return bad


# ---------------------------------------------------------------------------------------------- the checker can fail
def _write_package(root: Path, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\n"dandelion" = "dandelion"\n"dandelion.datasets" = "datasets"\n'
    )
    for rel, text in {"dandelion/__init__.py": "", "datasets/__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_checker_finds_a_cycle_through_a_deferred_import(tmp_path):
    root = _write_package(
        tmp_path,
        {
            "dandelion/a.py": "from . import b\n",
            "dandelion/b.py": "def f():\n    from dandelion.c import g\n    return g\n",
            "dandelion/c.py": "import dandelion.a\n\ndef g():\n    pass\n",
            "dandelion/d.py": "from .a import x\n",
        },
    )
    graph = import_graph(root)
    assert graph["dandelion.b"] == {"dandelion.c"}
    assert find_cycles(graph) == [["dandelion.a", "dandelion.b", "dandelion.c"]]


def test_checker_finds_core_importing_a_room_above_and_the_facade(tmp_path):
    root = _write_package(
        tmp_path,
        {
            "dandelion/core.py": "def load():\n    from dandelion.datasets.reader import read\n    return read\n",
            "dandelion/api.py": "from dandelion.datasets import reader\n",
            "datasets/reader.py": "def read():\n    from dandelion import api\n",
        },
    )
    bad = layer_violations(import_graph(root))
    assert bad == [
        "core module dandelion.core imports datasets module dandelion.datasets.reader",
        "datasets module dandelion.datasets.reader imports jobs module dandelion.api",
        "dandelion.datasets.reader imports the facade dandelion.api",
    ]
    assert find_cycles(import_graph(root)) == [["dandelion.api", "dandelion.datasets.reader"]]


def test_checker_finds_a_job_importing_the_benchmarks_and_a_core_module_importing_hydra(tmp_path):
    root = _write_package(
        tmp_path,
        {
            "dandelion/training/__init__.py": "",
            "dandelion/training/fit.py": "from dandelion.benchmarks.grid import cells\n",
            "dandelion/benchmarks/__init__.py": "",
            "dandelion/benchmarks/grid.py": "from dandelion.training import fit\nimport hydra\n",
            "dandelion/model.py": "def f():\n    from omegaconf import OmegaConf\n",
            "datasets/folder.py": "from hydra import compose\n",
        },
    )
    assert layer_violations(import_graph(root)) == [
        "jobs module dandelion.training.fit imports benchmarks module dandelion.benchmarks.grid"
    ]
    assert restricted_imports(module_files(package_dirs(root))) == [
        "dandelion.datasets.folder imports hydra",
        "dandelion.model imports omegaconf",
    ]


# ---------------------------------------------------------------------------------------------- the package
def test_the_package_has_no_import_cycle():
    graph = import_graph(ROOT)
    assert {"dandelion.forecast", "dandelion.cli.train", "dandelion.datasets.storage"} <= set(
        graph
    )  # the real tree was read
    assert find_cycles(graph) == []


def test_each_room_imports_only_its_own_and_those_below_and_nothing_imports_the_api():
    assert layer_violations(import_graph(ROOT)) == []


def test_hydra_stays_in_the_command_line_layer():
    assert restricted_imports(module_files(package_dirs(ROOT))) == []
