"""The package's shape: no import cycle anywhere, and every module under a layer of the contract.

The layers themselves are checked by import-linter (``lint-imports``, run by ``.ci/run``, and here
through its library entry point, so a plain ``pytest`` catches an upward import too); its contract is
``[tool.importlinter]`` in pyproject.toml and docs/architecture.md explains it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

grimp = pytest.importorskip("grimp", reason="the architecture checks need import-linter (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _cycles(graph: object) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    modules = sorted(graph.modules)  # type: ignore[attr-defined]
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}  # type: ignore[attr-defined]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            recurse = False
            for k in range(i, len(edges[v])):
                w = edges[v][k]
                if w not in index:
                    work.append((v, k + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
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
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def test_cycle_finder_finds_a_cycle() -> None:
    class Graph:
        modules = frozenset({"a", "b", "c", "d"})

        @staticmethod
        def find_modules_directly_imported_by(m: str) -> set[str]:
            return {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}[m]

    assert _cycles(Graph()) == [["a", "b", "c"]]


def test_no_module_of_harness_is_in_an_import_cycle() -> None:
    # every import statement counts: inside functions and under TYPE_CHECKING too
    graph = grimp.build_graph("harness", include_external_packages=False)
    assert len(graph.modules) > 100
    assert _cycles(graph) == []


def test_every_module_lies_in_a_layer_of_the_contract() -> None:
    contracts = _pyproject()["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    named = {part.strip() for layer in layers for part in layer.split("|")}
    graph = grimp.build_graph("harness", include_external_packages=False)
    outside = sorted(m for m in graph.modules
                     if m != "harness" and m != "harness.__main__" and not any(m == n or m.startswith(n + ".") for n in named))
    assert outside == [], "add these modules to a package of the flow, or their package to the layers in pyproject.toml"


def test_the_import_contracts_hold() -> None:
    from importlinter.application.use_cases import lint_imports
    from importlinter.configuration import configure

    configure()
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), cache_dir=None, no_logo=True) is True


def test_every_public_name_imports_from_harness() -> None:
    import harness

    missing = [name for name in harness.__all__ if getattr(harness, name, None) is None]
    assert missing == []
    assert len(harness.__all__) == len(set(harness.__all__))


def test_import_harness_loads_neither_numpy_nor_the_report_writers() -> None:
    import subprocess

    code = ("import sys, harness; print(sorted(m for m in ('numpy', 'jinja2', 'harness.report.render', 'harness.imports.torch') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
