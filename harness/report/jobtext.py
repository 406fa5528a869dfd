"""Job texts (``"2F0"``, ``"0OPT"``) read back into (stage, kind, micro-batch), in numpy.

A results document names the two jobs of each dependency by their texts
(:func:`harness.report.layout.job_label`: the stage's digits, the kind, the
micro-batch's digits or nothing), and a report resolves a million of them to job
ids. Hashing each text and comparing it with its match
(:meth:`harness.report.jobtable.JobTable.ids_of`) costs two Python-level C calls
per text on a million scattered strings; here the texts are joined into one
buffer (one C loop) and parsed with array operations over the texts, one digit
position at a time (a stage or micro-batch has a few digits):

* the stage is the leading run of ASCII digits, the micro-batch the trailing one
  (none: no micro-batch), the kind what lies between, compared byte for byte
  with each of the case's kinds;
* a text reads as a job only where writing that job back gives the very text:
  no leading zero in a number (``"01F2"`` is no job's text), at most 18 digits,
  a kind of the case.

That read is exact only when no kind holds an ASCII digit (``"1F12"`` would be
stage 1, kind ``F1``, micro-batch 2 or kind ``F``, micro-batch 12) or a newline
(the buffer's separator), and no kind is empty or longer than
:data:`MAX_KIND_BYTES` bytes of UTF-8: :func:`parse_job_texts` says ``None``
then, and the caller matches texts by hash instead. The run kinds
(``F``, ``SEND_F``, ``REDUCE_GRAD``, ...) always qualify.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["MAX_DIGITS", "MAX_KIND_BYTES", "parsable_kinds", "parse_job_texts"]

#: The longest kind (bytes of UTF-8) the parser compares (two 64-bit words).
MAX_KIND_BYTES = 16
#: The most digits a stage or micro-batch may have and still be read (int64 holds 18 exactly).
MAX_DIGITS = 18
#: Texts parsed per batch (bounds the temporaries: about 150 bytes per text).
_BATCH = 1 << 14
_ZERO, _NINE, _NL = ord("0"), ord("9"), ord("\n")


def parsable_kinds(kinds: Sequence[str]) -> list[bytes] | None:
    """``kinds`` as UTF-8 bytes where :func:`parse_job_texts` can read texts of them exactly,
    else ``None`` (a kind that is empty, holds an ASCII digit or a newline, is longer than
    :data:`MAX_KIND_BYTES` bytes, or is not valid Unicode text)."""
    out = []
    for kind in kinds:
        try:
            raw = kind.encode("utf-8")
        except (UnicodeEncodeError, AttributeError):
            return None
        if not raw or len(raw) > MAX_KIND_BYTES or any(_ZERO <= c <= _NINE or c == _NL for c in raw):
            return None
        out.append(raw)
    return out


def _words(raw: bytes) -> tuple[int, int]:
    """The bytes of a kind packed little-endian into two 64-bit words (zero-padded)."""
    padded = raw.ljust(MAX_KIND_BYTES, b"\0")
    return int.from_bytes(padded[:8], "little"), int.from_bytes(padded[8:], "little")


def parse_job_texts(names: Sequence[str], kinds: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Each text of ``names`` read as a job of one of ``kinds`` (see module doc).

    Args:
        names: the texts (``n`` of them; ``str``).
        kinds: the kinds a text may name, in code order.

    Returns:
        ``(stage, kind, microbatch)``, int64 arrays of shape ``(n,)``: per text its stage, the
        index of its kind in ``kinds`` and its micro-batch (-1: none); ``kind`` is -1 where the
        text is no job's text of these kinds (then the other two are meaningless). ``None`` where
        the texts cannot be read exactly this way: a kind :func:`parsable_kinds` refuses, a text
        that is not a ``str``, holds a newline or a surrogate code point.
    """
    table = parsable_kinds(kinds)
    if table is None:
        return None
    n = len(names)
    stage = np.empty(n, np.int64)
    code = np.empty(n, np.int64)
    micro = np.empty(n, np.int64)
    words = [(_words(raw), len(raw)) for raw in table]
    for lo in range(0, n, _BATCH):
        hi = min(n, lo + _BATCH)
        try:
            buf = "\n".join(names[lo:hi]).encode("utf-8")
        except (TypeError, UnicodeEncodeError):  # not a str, or a surrogate
            return None
        got = _parse_batch(buf, hi - lo, words)
        if got is None:
            return None
        stage[lo:hi], code[lo:hi], micro[lo:hi] = got
    return stage, code, micro


def _digit_run(b: np.ndarray, at: np.ndarray, room: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
    """Per text, the length and value of the run of ASCII digits of ``b`` from ``at`` on (``step``
    1: forward; -1: backward from ``at``, the run's last byte), at most ``room`` bytes long, counted
    up to :data:`MAX_DIGITS` + 1 digits (the value is meaningful for runs of at most :data:`MAX_DIGITS`)."""
    length = np.zeros(len(at), np.int64)
    value = np.zeros(len(at), np.int64)
    alive = room > 0
    k = 0
    while k <= MAX_DIGITS and alive.any():
        c = b[np.where(alive, at + step * k, 0)].astype(np.int64) - _ZERO
        alive &= (c >= 0) & (c <= 9)
        if k < MAX_DIGITS:  # most significant digit first forward; the k-th from the end backward
            value = np.where(alive, value * 10 + c if step == 1 else value + c * 10**k, value)
        length += alive
        k += 1
        alive &= length < room
    return length, value


def _parse_batch(buf: bytes, n: int, words: list[tuple[tuple[int, int], int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`parse_job_texts` of the ``n`` texts joined by newlines in ``buf``; ``None`` where a
    text held a newline (the count of separators tells)."""
    b = np.frombuffer(buf + b"\n", dtype=np.uint8)
    ends = np.flatnonzero(b == _NL)
    if len(ends) != n:
        return None
    starts = np.empty(n, np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    size = ends - starts
    s_len, s_val = _digit_run(b, starts, size, 1)
    m_len, m_val = _digit_run(b, ends - 1, size - s_len, -1)
    k_start = starts + s_len
    k_len = size - s_len - m_len
    ok = (s_len >= 1) & (s_len <= MAX_DIGITS) & (m_len <= MAX_DIGITS) & (k_len >= 1) & (k_len <= MAX_KIND_BYTES)
    ok &= (s_len == 1) | (b[starts] != _ZERO)  # "01F2" is no job's text
    ok &= (m_len <= 1) | (b[np.where(m_len > 0, ends - m_len, 0)] != _ZERO)
    w0 = np.zeros(n, np.uint64)
    w1 = np.zeros(n, np.uint64)
    for j in range(int(k_len[ok].max(initial=0))):
        inside = ok & (j < k_len)
        c = np.where(inside, b[np.where(inside, k_start + j, 0)], 0).astype(np.uint64)
        if j < 8:
            w0 |= c << np.uint64(8 * j)
        else:
            w1 |= c << np.uint64(8 * (j - 8))
    code = np.full(n, -1, np.int64)
    for k, ((a, c1), length) in enumerate(words):
        code[ok & (k_len == length) & (w0 == np.uint64(a)) & (w1 == np.uint64(c1))] = k
    return s_val, code, np.where(m_len > 0, m_val, -1)
