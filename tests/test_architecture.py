"""The package's layering, read from its source with ``ast`` (imports inside functions included).

Rules (docs/ARCHITECTURE.md):

* no import cycle between the package's modules;
* the core (``dandelion/`` except ``dandelion/api.py``) imports nothing from ``dandelion.solvers``,
  ``dandelion.datasets`` or ``dandelion.benchmarks``;
* no module of the package imports ``dandelion.api`` (the notebook facade sits on top of everything).

The checker is tested on small synthetic packages first, so that a rule that can never fail is caught.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS_ABOVE_CORE = ("dandelion.solvers", "dandelion.datasets", "dandelion.benchmarks")
FACADE = "dandelion.api"


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


def layer_violations(graph: dict[str, set[str]], core: str = "dandelion", above=ROOMS_ABOVE_CORE, facade: str = FACADE) -> list[str]:
    """Edges breaking the layering: a core module importing a room above it, any module importing the facade."""
    bad = []
    for m, deps in sorted(graph.items()):
        is_core = _in(m, core) and not any(_in(m, a) for a in above) and m != facade
        for d in sorted(deps):
            if is_core and any(_in(d, a) for a in above):
                bad.append(f"core module {m} imports {d}")
            if _in(d, facade) and m != facade:
                bad.append(f"{m} imports the facade {d}")
    return bad


# ---------------------------------------------------------------------------------------------- the checker can fail
def _write_package(root: Path, files: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text('[tool.setuptools.package-dir]\n"dandelion" = "dandelion"\n"dandelion.datasets" = "datasets"\n')
    for rel, text in {"dandelion/__init__.py": "", "datasets/__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_checker_finds_a_cycle_through_a_deferred_import(tmp_path):
    root = _write_package(tmp_path, {
        "dandelion/a.py": "from . import b\n",
        "dandelion/b.py": "def f():\n    from dandelion.c import g\n    return g\n",
        "dandelion/c.py": "import dandelion.a\n\ndef g():\n    pass\n",
        "dandelion/d.py": "from .a import x\n",
    })
    graph = import_graph(root)
    assert graph["dandelion.b"] == {"dandelion.c"}
    assert find_cycles(graph) == [["dandelion.a", "dandelion.b", "dandelion.c"]]


def test_checker_finds_core_importing_a_room_above_and_the_facade(tmp_path):
    root = _write_package(tmp_path, {
        "dandelion/core.py": "def load():\n    from dandelion.datasets.reader import read\n    return read\n",
        "dandelion/api.py": "from dandelion.datasets import reader\n",
        "datasets/reader.py": "def read():\n    from dandelion import api\n",
    })
    bad = layer_violations(import_graph(root))
    assert bad == ["core module dandelion.core imports dandelion.datasets.reader",
                   "dandelion.datasets.reader imports the facade dandelion.api"]
    assert find_cycles(import_graph(root)) == [["dandelion.api", "dandelion.datasets.reader"]]


# ---------------------------------------------------------------------------------------------- the package
def test_the_package_has_no_import_cycle():
    graph = import_graph(ROOT)
    assert {"dandelion.forecast", "dandelion.benchmarks.train", "dandelion.datasets.storage"} <= set(graph)  # the real tree was read
    assert find_cycles(graph) == []


def test_the_core_imports_no_job_and_nothing_imports_the_api():
    assert layer_violations(import_graph(ROOT)) == []
