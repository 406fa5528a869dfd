"""The chooser's answer as pytest parameters: benchmark the top configurations it ranked.

:func:`choose_params` turns the chooser's result (or its JSON document, as ``python -m harness
choose --json`` writes it) into ``pytest.param`` objects, one :class:`~harness.case.PipelineCase`
per ranked row, each with a readable id::

    doc = json.loads(Path("choose.json").read_text())

    @pytest.mark.parametrize("case", choose_params(doc, top=3))
    def test_top_configurations(case):
        result = run_case(case, backend="sim")

Each case is the row's reproduction (:meth:`harness.choose.layout_search.Candidate.case`): the
query's model with the row's layout and recomputation, the row's schedule, sizes, options and
communication model, and the query's memory limit, so ``run_case(case, backend="sim")`` measures the
row's ``step_ns``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import pytest

from harness.choose.candidates import Candidate
from harness.errors import ConfigError
from harness.model.transformer import TransformerCost

__all__ = ["choose_params", "row_id"]


@runtime_checkable
class _HasDocument(Protocol):
    def to_document(self) -> Mapping[str, Any]: ...


def choose_params(result: _HasDocument | Mapping[str, Any], top: int = 3, *, base: TransformerCost | None = None,
                  p: int | None = None, memory_limit_bytes: int | None = None,
                  fitting_only: bool = True) -> list[Any]:
    """The ``top`` ranked rows of the chooser's answer as ``pytest.param(PipelineCase(...), id=...)``.

    Args:
        result: the chooser's result (anything with ``to_document()``) or its JSON document.
        top: how many rows, in rank order (after ``fitting_only``).
        base: the model (default: the query's, ``document["query"]["base"]``, rebuilt as a
            :class:`~harness.model.transformer.TransformerCost`); the row's layout and
            recomputation replace its own.
        p: pipeline ranks (default: the query's ``p``).
        memory_limit_bytes: each case's memory limit per rank, bytes (default: the query's
            ``memory_limit_bytes``, else the document's ``limit_bytes``; ``None`` there: no limit).
        fitting_only: only the rows whose peak fits the limit.

    Returns:
        A list of ``pytest.param`` for ``@pytest.mark.parametrize("case", ...)``; ids as :func:`row_id`,
        made unique (the layer counts per stage added where two rows would share one, then the rank).

    Raises:
        ConfigError: ``top`` is not a positive whole number; the document has no ``rows``, or lacks
            the query's ``p`` or ``base`` where none is given; a row lacks a key a case needs.
    """
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ConfigError(f"choose_params: top must be a positive whole number, got {top!r}")
    document = result.to_document() if isinstance(result, _HasDocument) else result
    if not isinstance(document, Mapping):
        raise ConfigError(f"choose_params takes the chooser's result or its JSON document, got {type(result).__name__}")
    if "rows" not in document:
        raise ConfigError("choose_params: the document has no 'rows' key (the ranked configurations)")
    query: Mapping[str, Any] = document["query"] if isinstance(document.get("query"), Mapping) else {}
    if p is None:
        if "p" not in query:
            raise ConfigError("choose_params: give p, or a document whose query has 'p'")
        p = int(query["p"])
    if base is None:
        if not isinstance(query.get("base"), Mapping):
            raise ConfigError("choose_params: give base, or a document whose query has 'base' (the model's TransformerCost fields)")
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in query["base"].items()}  # JSON lists: tuples
        base = TransformerCost(**fields)
    limit = memory_limit_bytes
    if limit is None:
        limit = query.get("memory_limit_bytes", document.get("limit_bytes"))
    rows = sorted((r for r in document["rows"] if r.get("fits") or not fitting_only), key=lambda r: r.get("rank", 0))[:top]
    ids = _unique_ids(rows)
    params = []
    for row, ident in zip(rows, ids):
        try:
            rec = row["recompute"]
            cand = Candidate(str(row["layout"]), rec if isinstance(rec, str) else tuple(str(x) for x in rec), int(row["step_ns"]),
                             float(row.get("bubble", 0.0)), int(row.get("peak_bytes", 0)), tuple(row.get("peak_bytes_per_rank") or ()),
                             bool(row.get("fits", True)))
            case = cand.case(str(row["schedule"]), p, int(row["m"]), int(row["v"]), base, options=row.get("options") or {},
                             comm_model=row.get("comm_model"), memory_limit_bytes=limit)
        except KeyError as exc:
            raise ConfigError(f"choose_params: row {row.get('rank', '?')} has no {exc.args[0]!r} key") from None
        params.append(pytest.param(case, id=ident))
    return params


def _safe(text: str) -> str:
    """``text`` with only letters, digits and ``. _ + -`` (anything else ``_``): safe in a node id and for ``-k``."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", text)


def _ranges(stages: list[int]) -> str:
    runs: list[list[int]] = []
    for k in stages:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ".".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def _recompute_id(recompute: Any) -> str:
    """``"none"``, ``"full"``; per stage, each mode but ``none`` with its stages: ``"selective0-2"`` (stages 0
    to 2 selective, the others none), ``"full0_selective1-2"``, ``"full0-1.3"`` (stages 0, 1 and 3)."""
    if isinstance(recompute, str):
        return recompute
    modes = [str(x) for x in recompute]
    if len(set(modes)) <= 1:
        return modes[0] if modes else "none"
    stages: dict[str, list[int]] = {}
    for k, mode in enumerate(modes):
        stages.setdefault(mode, []).append(k)
    return "_".join(f"{mode}{_ranges(ks)}" for mode, ks in sorted(stages.items(), key=lambda kv: kv[1][0]) if mode != "none")


def row_id(row: Mapping[str, Any]) -> str:
    """A row's test id: schedule, v, m and its recomputation (``"ZB-H2-v1-m32-selective0-2"``, ``"1F1B-v1-m32-none"``)."""
    return _safe(f"{row['schedule']}-v{row['v']}-m{row['m']}-{_recompute_id(row['recompute'])}")


def _layer_counts(layout: str) -> str:
    """``"Et*4|t*3L"`` -> ``"4.3"``: the transformer layers of each stage."""
    return ".".join(str(sum(int(n) if n else 1 for n in re.findall(r"t(?:\*(\d+))?", part))) for part in layout.split("|"))


def _unique_ids(rows: list[Mapping[str, Any]]) -> list[str]:
    """:func:`row_id` per row; where two would be equal, the layer counts per stage added, then the rank."""
    ids = [row_id(r) for r in rows]
    for level in (1, 2):
        seen: dict[str, int] = {}
        for ident in ids:
            seen[ident] = seen.get(ident, 0) + 1
        if all(n == 1 for n in seen.values()):
            break
        ids = [ident if seen[ident] == 1 else
               ident + (f"-L{_safe(_layer_counts(str(r['layout'])))}" if level == 1 else f"-rank{_safe(str(r.get('rank', k + 1)))}")
               for k, (ident, r) in enumerate(zip(ids, rows))]
    return ids
