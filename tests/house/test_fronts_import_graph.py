"""The fronts (protab.cli, protab.serve, protab.report) and protab.request import as the house
asks: no import cycle between their modules (an import inside a function counts), no
``from protab import X`` (the root), and protab.serve uses only public names of the rest of
protab (private names of its own modules are its business). For every package of protab: no
private name of another package is taken, and what one package imports from another is that
package's face (its ``__init__`` exports it)."""

from __future__ import annotations

import ast
from pathlib import Path

import protab

SRC = Path(protab.__file__).parent
PACKAGES = ("cli", "serve", "report", "request")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (SRC / package).rglob("*.py"):
            parts = ["protab", *path.relative_to(SRC).with_suffix("").parts]
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) of every import of a file outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.module, a.name) for a in node.names]
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for m, path in modules.items():
        for module, name in _imports(path):
            target = f"{module}.{name}" if f"{module}.{name}" in modules else module
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != m:
                graph[m].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph, or None (depth-first search)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                return path[path.index(t):] + [t]
            if t not in state and (found := visit(t)):
                return found
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_cycles_between_the_modules_of_the_fronts():
    assert _cycle(_graph()) is None


def test_no_import_of_the_root_package():
    for m, path in _modules().items():
        assert not [name for module, name in _imports(path) if module == "protab" and name], m


def test_serve_uses_only_public_names_of_protab():
    for m, path in _modules().items():
        if not m.startswith("protab.serve"):
            continue
        for module, name in _imports(path):
            if not module.startswith("protab.") or module.startswith("protab.serve"):
                continue
            private = [part for part in [*module.split("."), name or ""] if part.startswith("_")]
            assert not private, f"{m} imports {module} {name or ''}"


def test_no_package_takes_a_private_name_of_another():
    """A package uses what another package exports; the ground floor's modules (protab._io,
    protab._frames, protab._progress, protab._matrices) are shared by design."""
    found = []
    for path in SRC.rglob("*.py"):
        own = path.relative_to(SRC).parts[0] if len(path.relative_to(SRC).parts) > 1 else None
        for module, name in _imports(path):
            parts = module.split(".")
            if parts[0] != "protab" or len(parts) < 2 or parts[1] == own:
                continue
            private = [p for p in parts[2:] if p.startswith("_")] + (
                [name] if name and name.startswith("_") and not (name.startswith("__") and name.endswith("__")) else [])
            if private:
                found.append(f"{path.relative_to(SRC)}: {module} {name or ''}")
    assert not found, "\n".join(found)


def _package_face(package: str) -> set[str]:
    import importlib

    return set(getattr(importlib.import_module(f"protab.{package}"), "__all__", ()))


def _face_misses(path: Path) -> list[str]:
    """Imports of ``path`` from another package that are not its face: a name taken from one of
    its modules must be exported by the package's ``__init__`` (the same object), unless that
    module is itself in the face (``protab.request.schema``, a namespace of types); a public
    module taken whole (``from protab.serve import commands``) is its own face."""
    import importlib

    own = path.relative_to(SRC).parts[0] if len(path.relative_to(SRC).parts) > 1 else None
    missed = []
    for module, name in _imports(path):
        parts = module.split(".")
        if parts[0] != "protab" or len(parts) < 2 or parts[1] == own or not (SRC / parts[1]).is_dir():
            continue
        face = _package_face(parts[1])
        if len(parts) == 2:  # from protab.X import name: a name of the face or a public module
            ok = name is None or name in face or (SRC / parts[1] / f"{name}.py").exists() and name[0] != "_"
        elif name is None or parts[2] in face:  # import protab.X.mod, or from a module of the face
            ok = parts[2][0] != "_"
        else:
            package = importlib.import_module(f"protab.{parts[1]}")
            ok = name in face and getattr(package, name) is getattr(importlib.import_module(module), name)
        if not ok:
            missed.append(f"{path.relative_to(SRC)}: {module} {name or ''}")
    return missed


def test_every_package_exports_what_other_packages_import_from_it():
    found = [miss for path in sorted(SRC.rglob("*.py")) for miss in _face_misses(path)]
    assert not found, "\n".join(found)
