"""JSON text written from columns: the report writers' encoder.

Trace and HTA files hold millions of events of a handful of shapes. Instead of a
Python dict per event handed to :mod:`json`, each shape is a ``%``-format
template filled row by row from lists made from numpy columns, in chunks, and
streamed to the file. The text is byte for byte what ``json.dumps`` writes for
the same events: strings are encoded with ``json.dumps`` (ASCII escapes, once
per distinct string), integers with ``%d``, floats with ``%r`` (``float.__repr__``,
which ``json`` uses too). Measured on 1 M events (``benchmarks/bench_trace_export.py``):
this is faster than building the dicts alone, before any encoder runs.

Faster still, for the millions of rows of one shape: :func:`int_texts` and
:func:`float_texts` turn a whole numpy column into its JSON number texts in C
(orjson's numpy encoder, then one ``split``), and :func:`join_rows` interleaves
those columns with the constant text between the fields (``zip`` + ``str.join``,
no Python call per row). orjson's shortest float form is ``repr``'s except below
1e-4 (``0.00001`` for ``1e-05``); those values, and non-finite ones, are written
with ``repr`` as before.

``results.json`` (nested, mostly lists of integers) goes through ``orjson``
(https://github.com/ijl/orjson), which writes UTF-8 rather than ASCII escapes
and the shortest float form with a bare exponent (``1e-05`` becomes ``1e-5``);
it parses to the same document. orjson writes NaN as ``null``, so
:func:`dumps_document` refuses non-finite floats itself, as ``json.dump(...,
allow_nan=False)`` did.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import IO, Any

import numpy as np
import orjson

__all__ = [
    "CHUNK_ROWS",
    "SMALL_INTS",
    "JsonStrings",
    "document_parts",
    "dumps_document",
    "float_texts",
    "format_rows",
    "int_texts",
    "join_rows",
    "microbatch_texts",
    "number_text",
    "pick",
    "write_document",
]

#: Rows formatted and written per chunk (bounds the text held in memory).
CHUNK_ROWS = 4096


class JsonStrings:
    """Cache of JSON string literals: ``js["2F0"] == '"2F0"'`` (``json.dumps`` of the string)."""

    def __init__(self) -> None:
        self._cache: dict[str, str] = {}

    def __getitem__(self, s: str) -> str:
        got = self._cache.get(s)
        if got is None:
            got = self._cache[s] = json.dumps(s)
        return got


def number_text(x: Any) -> str:
    """``json.dumps`` of a number or ``None`` (``null``), fast for ints.

    Raises:
        ValueError: a NaN or infinite float (as ``json.dumps(..., allow_nan=False)``).
    """
    if type(x) is int:
        return str(x)
    return json.dumps(x, allow_nan=False)


def format_rows(template: str, columns: Sequence[Sequence[Any]], sep: str = ",") -> Iterator[str]:
    """Yield ``sep.join(template % row for row in zip(*columns))`` in chunks of
    :data:`CHUNK_ROWS` rows, each chunk prefixed with ``sep`` except the first.

    Args:
        template: a ``%`` format for one row (``%d``, ``%r``, ``%s`` fields).
        columns: equal-length sequences, one per field.
        sep: the separator between rows (``","`` or ``", "``).
    """
    n = len(columns[0]) if columns else 0
    for lo in range(0, n, CHUNK_ROWS):
        hi = min(n, lo + CHUNK_ROWS)
        text = sep.join([template % row for row in zip(*(c[lo:hi] for c in columns))])
        yield text if lo == 0 else sep + text


#: Integers in ``0 <= x < SMALL_INTS`` are looked up in a table of their texts (no encoder at all).
SMALL_INTS = 1 << 16
_small_table: np.ndarray | None = None


def _small_texts() -> np.ndarray:
    global _small_table
    if _small_table is None:
        table = np.empty(SMALL_INTS, dtype=object)
        table[:] = [str(i) for i in range(SMALL_INTS)]
        _small_table = table
    return _small_table


def int_texts(values: np.ndarray) -> list[str]:
    """The ``%d`` text of each integer of ``values`` (shape ``(n,)``), made in C: looked up
    where all are small (stages, ranks, micro-batches), else through orjson's numpy encoder.

    Raises:
        TypeError: ``values`` is not an integer array orjson encodes (int64 and smaller).
    """
    if not len(values):
        return []
    if int(values.min()) >= 0 and int(values.max()) < SMALL_INTS:
        return _small_texts()[values].tolist()  # type: ignore[no-any-return]
    return orjson.dumps(np.ascontiguousarray(values), option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].decode("ascii").split(",")


def float_texts(values: np.ndarray) -> list[str]:
    """The ``%r`` (``float.__repr__``, what :mod:`json` writes) text of each float of ``values``
    (float64, shape ``(n,)``), made in C; ``nan``/``inf`` as ``%r`` writes them."""
    values = np.ascontiguousarray(values, dtype=np.float64)
    if not len(values):
        return []
    out = orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].decode("ascii").split(",")
    mag = np.abs(values)
    odd = np.flatnonzero(~np.isfinite(values) | ((mag < 1e-4) & (mag > 0)) | (mag >= 1e16))  # where orjson and repr may differ
    if len(odd):
        for k, x in zip(odd.tolist(), values[odd].tolist()):
            out[k] = repr(x)
    return out


def pick(texts: Sequence[str], codes: np.ndarray) -> list[str]:
    """``[texts[c] for c in codes]`` without a Python call per row (``codes``: ints, shape ``(n,)``)."""
    table = np.empty(len(texts), dtype=object)
    table[:] = list(texts)
    return table[codes].tolist() if len(codes) else []  # type: ignore[no-any-return]


def microbatch_texts(microbatch: np.ndarray) -> tuple[list[str], list[str]]:
    """Per job of ``microbatch`` (ints, -1 for none; shape ``(n,)``), its micro-batch as it ends a
    job text (``""`` for none) and as a JSON value (``"null"`` for none)."""
    has = microbatch >= 0
    if not has.all():
        column = np.asarray(int_texts(np.where(has, microbatch, 0)), dtype=object)
        return np.where(has, column, "").tolist(), np.where(has, column, "null").tolist()
    texts = int_texts(microbatch)
    return texts, texts


def join_rows(parts: Sequence[str | Sequence[str]], sep: str) -> str:
    """Rows joined by ``sep``: row ``i`` is the concatenation of ``parts``, where a ``str`` part
    is the same text in every row and a sequence part gives row ``i`` its ``i``-th text. All the
    sequence parts have one length (the rows; at least one part is a sequence).

    The pieces are laid out by slice assignment and joined once (no Python call per row)."""
    merged: list[Any] = []
    for part in parts:  # neighbouring constant texts as one
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    n = len(next(p for p in merged if not isinstance(p, str)))
    if not n:
        return ""
    k = len(merged) + 1
    pieces: list[str] = [sep] * (n * k)  # the last piece of each row: the separator
    for j, part in enumerate(merged):
        pieces[j::k] = [part] * n if isinstance(part, str) else part
    pieces.pop()  # no separator after the last row
    return "".join(pieces)


def document_parts(doc: dict[str, Any], key: str, separators: tuple[str, str] | None) -> tuple[str, str]:
    """The text of ``doc`` before and after the list under ``key``, as ``json.dumps``
    (with ``separators``; ``None`` for its defaults) writes it: ``head + items + tail``
    is the document with the items, written elsewhere, in that list.

    Raises:
        ValueError: a non-finite float in ``doc``.
    """
    marker = "\x00items\x00"
    text = json.dumps({**doc, key: marker}, separators=separators, allow_nan=False)
    head, tail = text.split(json.dumps(marker), 1)
    return head + "[", "]" + tail


def write_document(fh: IO[str], head: str, pieces: Iterable[Iterable[str]], tail: str, sep: str) -> None:
    """Write ``head``, the non-empty chunk streams of ``pieces`` joined by ``sep``, then ``tail``."""
    fh.write(head)
    wrote = False
    for stream in pieces:
        started = False
        for chunk in stream:
            if not chunk:
                continue
            if not started:
                if wrote:
                    fh.write(sep)
                started = True
            fh.write(chunk)
            wrote = True
    fh.write(tail)


_PLAIN = frozenset({int, str, bool, type(None)})


def _first_non_finite(value: Any, name: str) -> str | None:
    """Where ``value`` holds a NaN or infinite float (``name[3].x``), or ``None``."""
    if type(value) is float:
        return None if math.isfinite(value) else name
    if isinstance(value, dict):
        for k, x in value.items():
            got = _first_non_finite(x, f"{name}.{k}")
            if got:
                return got
    elif isinstance(value, (list, tuple)):
        types = set(map(type, value))  # C loops: the big job and dependency columns cost no Python call per item
        if types <= _PLAIN:
            return None
        if types == {list} and set(map(type, chain.from_iterable(value))) <= _PLAIN:  # e.g. deps: [[str, str, str], ...]
            return None
        if types <= _PLAIN | {float}:
            k = next((k for k, x in enumerate(value) if type(x) is float and not math.isfinite(x)), None)
            return None if k is None else f"{name}[{k}]"
        for k, x in enumerate(value):
            got = _first_non_finite(x, f"{name}[{k}]")
            if got:
                return got
    return None


def dumps_document(doc: Any, fallback: Callable[[Any], str] | None = None, scan: Any = None) -> bytes:
    """``doc`` as compact UTF-8 JSON bytes, through orjson.

    Integers beyond 64 bits and non-string keys, which orjson refuses, go through
    ``json.dumps`` (``fallback``) instead.

    Args:
        doc: the document.
        fallback: the encoder of documents orjson refuses (default: ``json.dumps``, compact).
        scan: what is searched for non-finite floats, where the caller knows part of ``doc``
            holds none (:func:`harness.report.fields.float_view`); default ``doc``.

    Raises:
        ValueError: a NaN or infinite float (names where in the document).
    """
    where = _first_non_finite(doc if scan is None else scan, "document")
    if where:
        raise ValueError(f"Out of range float values are not JSON compliant: {where}")
    try:
        return orjson.dumps(doc)
    except TypeError:
        text = (fallback or (lambda d: json.dumps(d, allow_nan=False, separators=(",", ":"))))(doc)
        return text.encode("utf-8")
