"""The library never imports what sits on top of it: the command line (cli/) and the lab (lab/: bench, ablate,
shared_data) use the library, never the other way round; and no modules import each other in a cycle.

Walks every module of src/litebert outside the upper layer and reads its imports from the syntax tree,
function-local and lazy-table ones included (the cycle walk: every import statement, function-local and
TYPE_CHECKING ones included; a "module:Class" string in a table, imported on use, is a lookup, not an import).
"""

import ast
import re
from pathlib import Path

import litebert

CLI = "litebert.cli"
LAB = "litebert.lab"


def _module_of(file: Path, root: Path) -> str:
    parts = file.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, module: str, is_package: bool, layer: str) -> list[str]:
    """The modules an import node names (relative imports resolved against `module`)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([base] if base else []))
        return [base] + [f"{base}.{alias.name}" for alias in node.names]
    # a module path written as a string (importlib, lazy tables)
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(rf"{layer}(\.\w+)*",
                                                                                          node.value):
        return [node.value]
    return []


def upward_imports(root: Path, layer: str = CLI, above: tuple[str, ...] = ("cli", "__main__.py")) -> list[str]:
    """'FILE:LINE imports NAME' (FILE relative to `root`) for each import of `layer` outside the files and folders
    `above` (the layer itself and what may use it)."""
    found = []
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root)
        if rel.parts[0] in above:
            continue
        module = _module_of(file, root)
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), filename=str(file))):
            names = [n for n in _imported(node, module, file.name == "__init__.py", layer)
                     if n == layer or n.startswith(layer + ".")]
            if names:
                found.append(f"{file.relative_to(root)}:{node.lineno} imports {names[0]}")
    return found


def test_no_library_module_imports_the_cli():
    root = Path(litebert.__file__).parent
    assert (root / "cli").is_dir() and len(list(root.rglob("*.py"))) > 30  # walking the real package
    assert upward_imports(root) == []


def test_no_library_module_imports_the_lab():
    root = Path(litebert.__file__).parent
    assert (root / "lab").is_dir()
    # cli/ runs `litebert bench` and `litebert ablate`.
    assert upward_imports(root, LAB, above=("lab", "cli")) == []


def test_the_walk_finds_every_form_of_upward_import(tmp_path):
    """Each way a module can reach the CLI is found (so the test above can fail)."""
    root = tmp_path / "litebert"
    (root / "cli").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "cli" / "_common.py").write_text("from litebert.config import AlbertConfig\n")  # downward: fine
    (root / "__main__.py").write_text("from litebert.cli import main\n")  # the entry point: fine
    (root / "a.py").write_text("def f():\n    from litebert.cli._common import load_config\n")
    (root / "b.py").write_text("import litebert.cli.pretrain\n")
    (root / "c.py").write_text("from litebert import cli\n")
    (root / "data" / "d.py").write_text("from ..cli import _common\n")
    (root / "e.py").write_text("import importlib\nimportlib.import_module('litebert.cli.data')\n")
    (root / "f.py").write_text("import litebert.client_tools\n'litebert.cli is the command line'\n")  # not the CLI
    (root / "g.py").write_text("def f():\n    from litebert.lab.bench import quick_bench\n")  # the lab
    assert upward_imports(root) == [
        "a.py:2 imports litebert.cli._common",
        "b.py:1 imports litebert.cli.pretrain",
        "c.py:1 imports litebert.cli",
        "data/d.py:1 imports litebert.cli",
        "e.py:2 imports litebert.cli.data",
    ]
    assert upward_imports(root, LAB, above=("lab",)) == ["g.py:2 imports litebert.lab.bench"]


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of the package it imports (anywhere in it: top level, functions, TYPE_CHECKING)."""
    files = {_module_of(f, root): f for f in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, file in files.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), filename=str(file))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = _imported(node, module, file.name == "__init__.py", root.name)
            if isinstance(node, ast.ImportFrom):  # `from pkg import mod`: the module; `from mod import f`: mod
                names = [n for n in names[1:] if n in files] or names[:1]
            for name in names:
                while name and name not in files:  # `import a.b.c`: the deepest module of the name
                    name = name.rpartition(".")[0]
                if name and name != module:
                    found.add(name)
        graph[module] = found
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as [a, b, ..., a], or [] (depth-first: a module met again while still on the path)."""
    state: dict[str, str] = {}  # "open": on the current path; "done": every path from it explored

    def visit(module: str, path: list[str]) -> list[str]:
        state[module] = "open"
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == "open":
                return path[path.index(dep):] + [module, dep] if dep in path else [module, dep]
            if dep not in state and (cycle := visit(dep, path + [module])):
                return cycle
        state[module] = "done"
        return []

    for module in sorted(graph):
        if module not in state and (cycle := visit(module, [])):
            return cycle
    return []


def test_no_import_cycle():
    root = Path(litebert.__file__).parent
    graph = import_graph(root)
    assert len(graph) > 30 and "litebert.heads" in graph["litebert.pipelines"]  # walking the real package
    cycle = find_cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_walk_finds_lazy_and_type_checking_cycles(tmp_path):
    """A cycle closed by a function-local or a TYPE_CHECKING import is found and named (so the test above can
    fail); a "module:Class" string is not an import."""
    root = tmp_path / "litebert"
    (root / "fam").mkdir(parents=True)
    (root / "fam" / "__init__.py").write_text("")
    (root / "a.py").write_text("from litebert import b\n")
    (root / "b.py").write_text("def f():\n    from litebert.fam.c import X\n")
    (root / "fam" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import Y\n")
    (root / "d.py").write_text("TABLE = {'x': 'litebert.e:E'}\n")
    (root / "e.py").write_text("import litebert.d\n")
    graph = import_graph(root)
    assert graph["litebert.e"] == {"litebert.d"} and graph["litebert.d"] == set()
    assert find_cycle(graph) == ["litebert.a", "litebert.b", "litebert.fam.c", "litebert.a"]
    (root / "b.py").write_text("")
    assert find_cycle(import_graph(root)) == []
