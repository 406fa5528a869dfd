"""User text made safe where it enters: lone surrogates (not valid Unicode, so no
UTF-8 file can hold them) and characters that would change how a line displays.

A lone surrogate reaches Python strings from a ``\\ud800`` escape in JSON, from
``os.fsdecode`` of a file name that is not UTF-8, or from a string literal; any
UTF-8 write of it fails with a ``UnicodeEncodeError``.
"""

from __future__ import annotations

import re
import unicodedata
import warnings

__all__ = ["UnsafeTextWarning", "first_surrogate", "lone_surrogate", "safe_text", "shown_in_terminal"]

_SURROGATE = re.compile("[\ud800-\udfff]")


class UnsafeTextWarning(UserWarning):
    """A name held characters that cannot be written as UTF-8 and was changed."""


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate (U+D800..U+DFFF) in ``text``, or ``None``."""
    match = _SURROGATE.search(text)
    return None if match is None else match.start()


def first_surrogate(value: object, path: str, skip: frozenset[str] = frozenset()) -> str | None:
    """The path (``cases[0].label``) of the first string inside ``value`` (lists and
    objects, keys included) that holds a surrogate code point, or ``None``; object
    keys in ``skip`` are not entered (large columns the harness writes itself)."""
    if isinstance(value, str):
        return path if _SURROGATE.search(value) is not None else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and _SURROGATE.search(key) is not None:
                return f"{path} (a key)" if path else "a key"
            if key in skip:
                continue
            found = first_surrogate(item, where, skip)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for k, item in enumerate(value):
            found = first_surrogate(item, f"{path}[{k}]", skip)
            if found:
                return found
    return None


def safe_text(text: str, what: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a surrogate pair, as
    ``os.fsdecode`` or a JSON escape may give, becomes the character it encodes), and an
    :class:`UnsafeTextWarning` naming ``what`` when anything changed."""
    if _SURROGATE.search(text) is None:
        return text
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if _SURROGATE.search(fixed) is not None:  # pragma: no cover - the codec replaces every lone one
        fixed = _SURROGATE.sub("\ufffd", fixed)
    warnings.warn(f"{what} {text!a} holds surrogate code points (U+D800..U+DFFF), which no UTF-8 file can hold; "
                  f"it is written as {fixed!r}", UnsafeTextWarning, stacklevel=3)
    return fixed


#: Bidirectional formatting characters (embeddings, overrides, isolates, marks).
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def shown_in_terminal(text: str) -> str:
    """``text`` for one terminal line: control characters (``\\n``, ``\\x1b``...) and
    bidirectional formatting characters (U+202E...) escaped as ``\\n``, ``\\u202e``, so
    a name can neither split a row nor reverse the rest of it."""
    if text.isprintable() and not (_BIDI & set(text)):
        return text
    out = []
    for ch in text:
        if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            out.append(ch.encode("unicode_escape").decode("ascii") if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    return "".join(out)
