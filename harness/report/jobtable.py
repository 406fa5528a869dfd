"""A results-document case's jobs as numpy columns, for the trace and HTA writers.

The results document keeps jobs in columns of Python lists (``case["jobs"]``,
:mod:`harness.report.results`); the writers need them as arrays, the job kinds
as small integer codes and each distinct job (stage, kind, micro-batch) as a
label id, so that a string is encoded once per distinct job, not once per event.
Everything here is linear in the number of jobs (plus a sort), whatever ``p``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from operator import eq, itemgetter
from typing import Any

import numpy as np

from harness.report.jobtext import parsable_kinds, parse_job_texts
from harness.report.jsontext import pick
from harness.report.layout import job_label, track_overflow

__all__ = ["JobTable", "label_texts"]


def label_texts(stage: list[int], kind: list[int], microbatch: list[int], kinds: list[str]) -> list[str]:
    """``job_label(stage[i], kinds[kind[i]], microbatch[i] or None where -1)`` for every i, made from
    columns (:func:`harness.report.jsontext.join_rows`) where no kind holds the separator used."""
    from harness.report.jsontext import int_texts, join_rows, microbatch_texts, pick

    sep = "\n"
    if not stage or any(sep in k for k in kinds):
        return [job_label(s, kinds[k], None if b < 0 else b) for s, k, b in zip(stage, kind, microbatch)]
    mb_name, _ = microbatch_texts(np.asarray(microbatch, dtype=np.int64))
    return join_rows([int_texts(np.asarray(stage, dtype=np.int64)), pick(kinds, np.asarray(kind, dtype=np.int64)), mb_name], sep).split(sep)


def _dense(size: int, n: int) -> bool:
    """Whether a lookup table of ``size`` entries is small enough for ``n`` jobs (about 4 per job)."""
    return size <= 4 * n + 4096


@dataclass
class JobTable:
    """The jobs of one case, in the case's job order (``n`` jobs).

    Attributes:
        rank, stream, stage, chunk, step: int64 arrays, shape ``(n,)``.
        start_ns, end_ns: int64 arrays, shape ``(n,)``, ns on the case's time base.
        microbatch: int64 array, shape ``(n,)``; -1 for a job without one (``OPT``).
        kinds: the distinct kind tokens; ``kind`` (int64, ``(n,)``) indexes it.
        label: int64 array, shape ``(n,)``: index into ``labels``.
        labels: distinct job texts (``"2F0"``), made on first use (a run's report needs none of them:
            its dependencies are resolved by parsing, :mod:`harness.report.jobtext`); ``label_stage``, ``label_kind``
            (index into ``kinds``), ``label_microbatch`` (-1: none) describe each.
    """

    rank: np.ndarray
    stream: np.ndarray
    stage: np.ndarray
    chunk: np.ndarray
    step: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    microbatch: np.ndarray
    kind: np.ndarray
    kinds: list[str]
    label: np.ndarray
    label_stage: list[int]
    label_kind: list[int]
    label_microbatch: list[int]
    _labels: list[str] | None = field(default=None, repr=False, compare=False)
    _deps: tuple[Any, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = field(default=None, repr=False, compare=False)
    _index: dict[str, int] | None = field(default=None, repr=False, compare=False)
    _text_ids: np.ndarray | None = field(default=None, repr=False, compare=False)
    _hashed: tuple[np.ndarray, np.ndarray] | bool | None = field(default=None, repr=False, compare=False)
    _finders: dict[bool, tuple[np.ndarray, np.ndarray | None, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)
    #: ``(largest stage, micro-batch span, sorted label keys)`` where job texts can be parsed
    #: (:mod:`harness.report.jobtext`) instead of hashed; set by :meth:`from_case`.
    _parse_keys: tuple[int, int, np.ndarray] | None = field(default=None, repr=False, compare=False)
    _key_table: np.ndarray | None = field(default=None, repr=False, compare=False)
    _steps: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)
    _stream_order: np.ndarray | None = field(default=None, repr=False, compare=False)
    _found: dict[tuple[int, int, bool], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.kind)

    @classmethod
    def from_case(cls, case: dict[str, Any]) -> JobTable:
        """Columns of ``case["jobs"]``.

        Raises:
            KeyError: a job column is missing. TypeError, ValueError: a column holds
                something other than integers (``microbatch``: or ``None``).
        """
        jobs = case["jobs"]
        n = len(jobs["kind"])

        def ints(name: str) -> np.ndarray:
            return np.asarray(jobs[name], dtype=np.int64).reshape(n)

        kind_col, mb_col = jobs["kind"], jobs["microbatch"]
        codes = {k: c for c, k in enumerate(dict.fromkeys(kind_col))}  # in order of first appearance
        kind = np.fromiter(map(codes.__getitem__, kind_col), dtype=np.int64, count=n)
        if None in mb_col:
            mb = np.fromiter((-1 if x is None else x for x in mb_col), dtype=np.int64, count=n)
        else:
            mb = np.asarray(mb_col, dtype=np.int64).reshape(n)
        stage = ints("stage")
        kinds = list(codes)
        parse_keys = None
        if n:
            span_mb = int(mb.max()) + 2
            key = (stage * len(kinds) + kind) * span_mb + (mb + 1)
            top = int(key.max()) + 1
            if int(key.min()) >= 0 and _dense(top, n):  # np.unique by counting: no sort
                present = np.bincount(key, minlength=top) > 0
                uniq = np.flatnonzero(present).astype(np.int64)
                label = (np.cumsum(present) - 1)[key].astype(np.int64)
            else:
                uniq, label = np.unique(key, return_inverse=True)
                label = label.reshape(n).astype(np.int64)
            u_mb = (uniq % span_mb - 1).tolist()
            rest = uniq // span_mb
            u_kind = (rest % len(kinds)).tolist()
            u_stage = (rest // len(kinds)).tolist()
            if int(stage.min()) >= 0 and int(mb.min()) >= -1 and parsable_kinds(kinds) is not None:  # one text per label
                parse_keys = (int(stage.max()), span_mb, uniq)
        else:
            label = np.zeros(0, dtype=np.int64)
            u_mb, u_kind, u_stage = [], [], []
        return cls(rank=ints("rank"), stream=ints("stream"), stage=stage, chunk=ints("chunk"), step=ints("step"),
                   start_ns=ints("start_ns"), end_ns=ints("end_ns"), microbatch=mb, kind=kind, kinds=kinds,
                   label=label, label_stage=u_stage, label_kind=u_kind, label_microbatch=u_mb,
                   _parse_keys=parse_keys)

    @property
    def labels(self) -> list[str]:
        """The distinct job texts, by label id (:func:`label_texts`; made once, on first use)."""
        if self._labels is None:
            self._labels = label_texts(self.label_stage, self.label_kind, self.label_microbatch, self.kinds)
        return self._labels

    def _text_index(self) -> dict[str, int]:
        """Job text -> the last label id of that text."""
        if self._index is None:
            self._index = dict(zip(self.labels, range(len(self.labels))))
        return self._index

    def _hashes(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The labels' string hashes sorted, and the label id of each; ``None`` where two labels share
        a hash (equal texts, or a true collision): then only the dict tells them apart."""
        if self._hashed is None:
            h = np.fromiter(map(hash, self.labels), dtype=np.int64, count=len(self.labels))
            order = np.argsort(h, kind="stable")
            sh = h[order]
            self._hashed = (sh, order) if not (sh[1:] == sh[:-1]).any() else False
        return self._hashed if isinstance(self._hashed, tuple) else None

    def ids_of(self, names: list[str]) -> np.ndarray:
        """Per text of ``names``, its label id (the last one of that text), or -1. By the texts' hashes
        (computed in C, matched by binary search) and one string comparison per match, so the labels'
        dict is never built; through the dict where labels share a hash. Where the case's kinds allow it
        (:mod:`harness.report.jobtext`), the texts are parsed in numpy instead, which gives the same ids."""
        parsed = self._ids_by_parse(names)
        if parsed is not None:
            return parsed
        hashed = self._hashes()
        if hashed is None:
            index = self._text_index()
            return np.fromiter(map(index.get, names, repeat(-1)), dtype=np.int64, count=len(names))
        sh, order = hashed
        if not len(sh) or not names:
            return np.full(len(names), -1, dtype=np.int64)
        q = np.fromiter(map(hash, names), dtype=np.int64, count=len(names))
        by_q = np.argsort(q)  # sorted queries: a binary search that walks the table in order (3x faster at 1 M)
        pos = np.empty(len(q), dtype=np.int64)
        pos[by_q] = np.minimum(np.searchsorted(sh, q[by_q]), len(sh) - 1)
        ids = np.where(sh[pos] == q, order[pos], -1)
        hit = np.flatnonzero(ids >= 0)
        asked = names if len(hit) == len(names) else pick(names, hit)
        same = np.fromiter(map(eq, asked, pick(self.labels, ids[hit])), dtype=bool, count=len(hit))  # a hash is no proof
        ids[hit[~same]] = -1
        return ids.astype(np.int64)

    def _ids_by_parse(self, names: list[str]) -> np.ndarray | None:
        """:meth:`ids_of` by parsing the texts (:func:`harness.report.jobtext.parse_job_texts`) and
        looking their (stage, kind, micro-batch) keys up among the labels'; ``None`` where the
        texts cannot be read so (then :meth:`ids_of` hashes them)."""
        if self._parse_keys is None or not names:
            return None
        got = parse_job_texts(names, self.kinds)
        if got is None:
            return None
        top, span_mb, keys = self._parse_keys
        stage, kind, mb = got
        ok = (kind >= 0) & (stage <= top) & (mb <= span_mb - 2)
        key = (np.where(ok, stage, 0) * len(self.kinds) + np.where(ok, kind, 0)) * span_mb + np.where(ok, mb, 0) + 1
        size = (top + 1) * len(self.kinds) * span_mb  # every key is below this
        if _dense(size, self.n):  # a table by key: one gather, no binary search of a million keys
            if self._key_table is None:
                self._key_table = np.full(size, -1, dtype=np.int64)
                self._key_table[keys] = np.arange(len(keys), dtype=np.int64)
            return np.where(ok, self._key_table[key], -1)
        pos = np.minimum(np.searchsorted(keys, key), len(keys) - 1)
        return np.where(ok & (keys[pos] == key), pos, -1).astype(np.int64)

    def step_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct step values (sorted, int64, shape ``(s,)``) and per job the index of its step
        among them (int64, shape ``(n,)``): ``np.unique(step, return_inverse=True)``, counted instead
        of sorted where the steps span a small range; made once."""
        if self._steps is None:
            lo, hi = (int(self.step.min()), int(self.step.max())) if self.n else (0, -1)
            if self.n and _dense(hi - lo + 1, self.n):
                present = np.bincount(self.step - lo) > 0
                code_of = np.cumsum(present) - 1
                self._steps = (np.flatnonzero(present).astype(np.int64) + lo, code_of[self.step - lo].astype(np.int64))
            else:
                values, code = np.unique(self.step, return_inverse=True)
                self._steps = (values.astype(np.int64), code.reshape(self.n).astype(np.int64))
        return self._steps

    def text_ids(self) -> np.ndarray:
        """Per job (int64, shape ``(n,)``), its label id with labels of one text merged into the last
        such id, the one :meth:`dep_ids` gives (texts collide only for imported kinds ending in digits:
        stage 1, kind ``F1``, micro-batch 2 and stage 1, kind ``F``, micro-batch 12 are both ``1F12``)."""
        if self._text_ids is None:
            if self._parse_keys is not None or self._hashes() is not None or len(self._text_index()) == len(self.labels):
                self._text_ids = self.label
            else:
                index = self._text_index()
                canon = np.asarray([index[x] for x in self.labels], dtype=np.int64)
                self._text_ids = canon[self.label]
        return self._text_ids

    def find(self, step: np.ndarray, label: np.ndarray, by_text: bool = False) -> np.ndarray:
        """Per query ``(step[k], label[k])`` (int64 arrays, shape ``(q,)``), the index of the last job
        (in job order) of that step value and label id, or -1 (label -1, or no such job). With
        ``by_text``, labels of one text count as one (:meth:`text_ids`; ``label`` from :meth:`dep_ids`).
        Per table once: a table of the last job per (step, label) where that is small (at most about
        4 entries per job), else one sort of the jobs; then per query a lookup, or a binary search."""
        by_text = by_text and self.text_ids() is not self.label  # one text per label: the same finder
        nl = max(1, len(self.label_kind))
        got = self._finders.get(by_text)
        if got is None:
            step_values, step_code = self.step_codes()
            key = step_code * nl + (self.text_ids() if by_text else self.label)
            if _dense(len(step_values) * nl, self.n):
                last = np.full(len(step_values) * nl, -1, dtype=np.int64)
                np.maximum.at(last, key, np.arange(self.n, dtype=np.int64))  # the last job (in job order) of each key
                got = (step_values, None, last)
            else:
                order = np.argsort(key, kind="stable")
                sk = key[order]
                keep = np.ones(len(sk), dtype=bool)
                keep[:-1] = sk[1:] != sk[:-1]
                got = (step_values, sk[keep], order[keep])
            self._finders[by_text] = got
        step_values, uk, ui = got
        if not len(ui) or not len(label):
            return np.full(len(label), -1, dtype=np.int64)
        spos = np.minimum(np.searchsorted(step_values, step), len(step_values) - 1)
        ok = (step_values[spos] == step) & (label >= 0) & (label < nl)
        q = np.where(ok, spos * nl + label, 0)
        if uk is None:
            return np.where(ok, ui[q], -1).astype(np.int64)
        pos = np.minimum(np.searchsorted(uk, q), len(uk) - 1)
        return np.where(ok & (uk[pos] == q), ui[pos], -1).astype(np.int64)

    def find_step(self, step: int, label: np.ndarray, by_text: bool = False) -> np.ndarray:
        """:meth:`find` of every query of ``label`` in the one step value ``step``, remembered per
        ``(step, label, by_text)`` (the trace's arrows and the page's grid ask the same), so the
        result must not be written to.

        Returns:
            int64, shape ``(q,)``: the job index per query, or -1."""
        by_text = by_text and self.text_ids() is not self.label
        key = (int(step), id(label), by_text)
        got = self._found.get(key)
        if got is None or got[0] is not label:  # (the array itself is kept: its id is not reused while it is)
            got = self._found[key] = (label, self.find(np.full(len(label), step, dtype=np.int64), label, by_text=by_text))
        return got[1]

    def dep_ids(self, deps: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The case's dependencies (``[source text, target text, "end" | "start"]``, ``d`` of them) as
        label ids: ``(source, target, from_start)``, int64, int64 and bool arrays of shape ``(d,)``;
        -1 for a job text that is not among ``labels`` (the last of equal texts, as a dict keeps).
        Matched in C by the texts' hashes, then compared (:meth:`ids_of`), no Python call per dependency;
        remembered for ``deps``.

        Raises:
            TypeError, IndexError: a dependency is not a sequence of three items.
        """
        if self._deps is not None and self._deps[0] is deps:
            return self._deps[1]
        d = len(deps)
        src = self.ids_of(list(map(itemgetter(0), deps)))
        dst = self.ids_of(list(map(itemgetter(1), deps)))
        start = np.fromiter(map("start".__eq__, map(itemgetter(2), deps)), dtype=bool, count=d)
        self._deps = (deps, (src, dst, start))
        return src, dst, start

    def stream_order(self) -> np.ndarray:
        """The jobs by stream, then start, then end, ties in job order (int64, shape ``(n,)``):
        ``np.lexsort((end_ns, start_ns, stream))``, made once (the trace's tracks and the page's
        lanes both want it)."""
        if self._stream_order is None:
            self._stream_order = np.lexsort((self.end_ns, self.start_ns, self.stream)).astype(np.int64)
        return self._stream_order

    def sub_tracks(self) -> np.ndarray:
        """Per job, its sub-track within its stream (0 unless jobs of the stream overlap):
        :func:`harness.report.layout.track_overflow` per stream, run only on the streams
        that have an overlap (a sort finds them), so a clean run costs one sort."""
        sub = np.zeros(self.n, dtype=np.int64)
        if self.n < 2:
            return sub
        order = self.stream_order()
        s, a, b = self.stream[order], self.start_ns[order], self.end_ns[order]
        clash = (s[1:] == s[:-1]) & (b[:-1] > a[1:])
        if not clash.any():
            return sub
        starts, ends = self.start_ns.tolist(), self.end_ns.tolist()
        for stream in np.unique(s[1:][clash]).tolist():
            members = np.flatnonzero(self.stream == stream).tolist()
            sub[members] = track_overflow(starts, ends, members)
        return sub

