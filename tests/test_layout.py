"""The package's shape: layers, public names across modules, no cycles, short module docstrings.

These read the source (``ast``), not the behaviour: they keep the layers described in
``docs/algorithm.md`` ("Where each equation lives") from drifting.
"""
import ast
import os
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ntnumba"

# not ntnumba names: numba's dispatcher cache (read by the cache guard), CPython's frames,
# the mmap object of a numpy.memmap
THIRD_PARTY_PRIVATE = {"_cache", "_cache_path", "_getframe", "_mmap"}


def _modules():
    """``{dotted name: (path, ast)}`` of every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = (path, ast.parse(path.read_text(), filename=str(path)))
    return out


def _resolve(module, node):
    """The absolute module a ``from ... import`` of ``module`` names (None: not the package)."""
    if node.level == 0:
        name = node.module or ""
        return name if name == "ntnumba" or name.startswith("ntnumba.") else None
    is_pkg = _modules_cache[module][0].name == "__init__.py"
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


_modules_cache = _modules()


def _private(name):
    return name.startswith("_") and not name.startswith("__")


def _own_private_names(tree):
    """Private names a module defines: functions, classes, assignments, parameters and
    attributes set on ``self``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    # attributes a class sets through ``vars(self).update(...)``: keys (or keywords) of this
    # module that it also reads as ``self.<name>``
    on_self = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
               and isinstance(node.value, ast.Name) and node.value.id == "self"}
    keys = {k.value for node in ast.walk(tree) if isinstance(node, ast.Dict)
            for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    keys |= {kw.arg for node in ast.walk(tree) if isinstance(node, ast.Call)
             for kw in node.keywords if kw.arg}
    keys |= {node.slice.value for node in ast.walk(tree)
             if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
             and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)}
    names |= keys & on_self
    return {n for n in names if _private(n)}


def _named_attributes(tree):
    """``(line, name)`` of private attribute names given as strings: ``getattr(obj, "_x")``
    (and has/set/delattr) on anything but ``self``, and dictionary keys (attributes set
    through ``vars(obj).update``)."""
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")):
            out.append(node.args[1].value)
        elif isinstance(node, ast.Dict):
            out.extend(k.value for k in node.keys
                       if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return [n for n in out if _private(n)]


def _crossings():
    found = []
    for module, (path, tree) in _modules_cache.items():
        own = _own_private_names(tree)
        imported_modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _resolve(module, node)
                if target is None:
                    continue
                for alias in node.names:
                    if _private(alias.name):
                        found.append(f"{module}: imports {alias.name} from {target}")
                    if f"{target}.{alias.name}" in _modules_cache:
                        imported_modules.add(alias.asname or alias.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                value = node.value
                if isinstance(value, ast.Name) and value.id in imported_modules:
                    found.append(f"{module}: {value.id}.{node.attr}")
                elif node.attr not in own and node.attr not in THIRD_PARTY_PRIVATE:
                    found.append(f"{module}: .{node.attr} (defined in another module)")
        found += [f"{module}: '{name}' (defined in another module)"
                  for name in _named_attributes(tree)
                  if name not in own and name not in THIRD_PARTY_PRIVATE]
    return found


def test_no_private_name_crosses_a_module_border():
    assert _crossings() == []


def test_the_crossing_check_sees_a_private_import_and_a_private_attribute(monkeypatch):
    tree = ast.parse("from .model.stage1 import _hidden\n"
                     "from .model import stage1\n"
                     "x = stage1._other\n"
                     "y = obj._elsewhere\n"
                     "obj._built = 1\n"
                     "z = getattr(obj, '_named')\n"
                     "attrs = {'_key': 1}\n")
    monkeypatch.setitem(_modules_cache, "ntnumba.fake", (PACKAGE / "fake.py", tree))
    found = [f for f in _crossings() if f.startswith("ntnumba.fake")]
    assert found == ["ntnumba.fake: imports _hidden from ntnumba.model.stage1",
                     "ntnumba.fake: stage1._other",
                     "ntnumba.fake: ._elsewhere (defined in another module)",
                     "ntnumba.fake: ._built (defined in another module)",
                     "ntnumba.fake: '_named' (defined in another module)",
                     "ntnumba.fake: '_key' (defined in another module)"]


def _import_graph():
    graph = {m: set() for m in _modules_cache}
    for module, (_, tree) in _modules_cache.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _resolve(module, node)
                if target is None:
                    continue
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    dep = full if full in _modules_cache else target
                    if dep in _modules_cache and dep != module:
                        graph[module].add(dep)
    return graph


def _cycles(graph):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    # the package's __init__ modules import nothing that imports them back; the top-level
    # __init__ loads its names lazily and is left out
    graph = {m: {d for d in deps if d != "ntnumba"} for m, deps in _import_graph().items()
             if m != "ntnumba"}
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


LAYERS = ["core", "model", "partition", "engine", "io", "estimators"]


def test_lower_layers_do_not_import_higher_ones():
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for module, deps in _import_graph().items():
        parts = module.split(".")
        if len(parts) < 2 or parts[1] not in rank:
            continue
        for dep in deps:
            dparts = dep.split(".")
            if len(dparts) >= 2 and dparts[1] in rank and rank[dparts[1]] > rank[parts[1]]:
                bad.append(f"{module} -> {dep}")
    assert bad == []


@pytest.mark.parametrize("module", sorted(_modules_cache))
def test_module_docstring_at_most_60_lines(module):
    doc = ast.get_docstring(_modules_cache[module][1]) or ""
    assert len(doc.splitlines()) <= 60


def test_no_benchmark_or_reproduction_harness_in_the_package():
    names = {m.rsplit(".", 1)[-1] for m in _modules_cache}
    assert not names & {"bench", "bench_large", "devsuite", "reproduce", "_reference"}


def test_package_size():
    lines = sum(len(p.read_text().splitlines()) for p, _ in _modules_cache.values())
    assert lines <= 13500, lines


def test_every_module_lives_in_a_layer_or_is_public():
    public = {"__init__", "__main__", "cli", "dask", "datasets", "kernels", "metrics",
              "plotting"}
    top = [p.stem for p in PACKAGE.glob("*.py")]
    assert sorted(set(top) - public) == []
    assert sorted(d.name for d in PACKAGE.iterdir()
                  if d.is_dir() and (d / "__init__.py").exists()) == sorted(LAYERS)
    for layer in LAYERS:
        assert os.path.exists(PACKAGE / layer / "__init__.py")
