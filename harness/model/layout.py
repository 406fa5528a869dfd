"""Stage layouts: which layers each pipeline stage holds, in Megatron-Core's layout syntax.

Megatron-Core's ``--pipeline-model-parallel-layout`` (Megatron-Core developer
guide, "Custom Pipeline Model Parallel Layout";
``megatron/core/transformer/pipeline_parallel_layer_layout.py``) writes a
model's partition as one string, stages in model order (for interleaved
schedules: every stage of virtual rank 0, then of virtual rank 1, ...):

* ``|`` ends a stage; an empty stage is legal (``E||t|L``);
* ``E`` the embedding, ``t`` a transformer layer, ``L`` the LM head and loss;
* ``x*N`` repeats one symbol (``t*3`` = ``ttt``), ``(...)*N`` a group, which
  may contain ``|`` (``(tt|)*2`` = ``tt|tt|``); groups nest;
* commas are cosmetic and ignored; so is white space.

The MTP symbol ``m`` (multi-token prediction, DeepSeek-V3) is refused: the
harness has no cost for it. ``"Et*3|(tt|)*29,m|L"`` is Megatron's DeepSeek-V3
example; ``"Et*6|t*6|t*6|t*6L"`` a 24-layer model on four stages.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import ConfigError

__all__ = ["StageLayout", "parse_layout"]

#: Layers the layout syntax names, with what they are.
SYMBOLS = {"E": "embedding", "t": "transformer layer", "L": "LM head and loss"}
#: Repetitions above this are a typo (``t*1000000``), not a model.
_MAX_REPEAT = 100_000


@dataclass(frozen=True)
class StageLayout:
    """Layers per pipeline stage, in model (stage) order.

    Attributes:
        text: the layout as given.
        layers: per stage, its transformer layers.
        embedding: per stage, whether it holds the embedding.
        head: per stage, whether it holds the LM head and loss.
    """

    text: str
    layers: tuple[int, ...]
    embedding: tuple[bool, ...]
    head: tuple[bool, ...]

    @property
    def num_stages(self) -> int:
        return len(self.layers)

    @property
    def num_layers(self) -> int:
        """Transformer layers of the whole model."""
        return sum(self.layers)

    def to_text(self) -> str:
        """The layout spelt out stage by stage (``"Ettt|ttt|tttL"``), which parses back to it."""
        return "|".join(("E" if e else "") + "t" * n + ("L" if h else "") for n, e, h in zip(self.layers, self.embedding, self.head))


def _error(text: str, pos: int, what: str) -> ConfigError:
    marker = " " * pos + "^"
    return ConfigError(f"stage layout {text!r}, position {pos}: {what}\n    {text}\n    {marker}")


def _expand(text: str) -> str:
    """``text`` with repetitions expanded and commas and spaces dropped.

    Raises:
        ConfigError: an unknown symbol, a ``*`` without a count or with nothing
            to repeat, unbalanced parentheses, an MTP ``m`` (each names the position).
    """
    pos = 0

    def count() -> int:
        nonlocal pos
        start = pos
        while pos < len(text) and text[pos].isascii() and text[pos].isdigit():
            pos += 1
        if start == pos:
            raise _error(text, start, "'*' needs a count (t*3, (tt|)*2)")
        n = int(text[start:pos])
        if n > _MAX_REPEAT:
            raise _error(text, start, f"repetition {n} is over {_MAX_REPEAT}")
        return n

    def group(depth: int) -> str:
        nonlocal pos
        out: list[str] = []
        while pos < len(text):
            c = text[pos]
            if c in " ,\t":
                pos += 1
            elif c in SYMBOLS or c == "|":
                out.append(c)
                pos += 1
            elif c == "m":
                raise _error(text, pos, "'m' is a multi-token-prediction (MTP) layer, which the harness has no cost model for; "
                                        "use E, t, L and |")
            elif c == "(":
                pos += 1
                inner = group(depth + 1)
                if pos >= len(text) or text[pos] != ")":
                    raise _error(text, pos, "'(' is not closed")
                pos += 1
                out.append(inner)
            elif c == ")":
                if depth == 0:
                    raise _error(text, pos, "')' without its '('")
                return "".join(out)
            elif c == "*":
                if not out:
                    raise _error(text, pos, "'*' with nothing before it to repeat")
                pos += 1
                n = count()
                out[-1] = out[-1] * n
            else:
                raise _error(text, pos, f"unknown symbol {c!r}; the layout takes E (embedding), t (transformer layer), "
                                        "L (LM head and loss), | (end of a stage), x*N and (...)*N repetitions, commas")
        return "".join(out)

    expanded = group(0)
    if len(expanded) > 10 * _MAX_REPEAT:
        raise ConfigError(f"stage layout {text!r}: expands to {len(expanded)} symbols; too large for a model")
    return expanded


def parse_layout(text: str, num_stages: int | None = None, num_layers: int | None = None) -> StageLayout:
    """Parse a Megatron-Core pipeline layout string (see the module docstring).

    Args:
        text: e.g. ``"Et*3|(tt|)*2|tL"``.
        num_stages: the pipeline's stage count (``p * v``), checked when given.
        num_layers: the model's transformer layers, checked when given.

    Returns:
        The layers each stage holds.

    Raises:
        ConfigError: a syntax error (names the position in the string), an
            embedding not on the first stage or an LM head not on the last (or
            more than one of either), a symbol after ``L`` in its stage or before
            ``E``, a stage count or a layer count that does not match.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"stage layout must be a non-empty string like 'Et*3|t*4|t*3L', got {text!r}")
    stages = _expand(text).split("|")  # every '|' separates, as in Megatron: 'tt|' is a stage of two layers and an empty one
    layers, emb, head = [], [], []
    for k, stage in enumerate(stages):
        if "E" in stage and (stage.count("E") > 1 or not stage.startswith("E")):
            raise ConfigError(f"stage layout {text!r}: stage {k} ({stage!r}) must start with its one embedding E")
        if "L" in stage and (stage.count("L") > 1 or not stage.endswith("L")):
            raise ConfigError(f"stage layout {text!r}: stage {k} ({stage!r}) must end with its one LM head and loss L")
        layers.append(stage.count("t"))
        emb.append("E" in stage)
        head.append("L" in stage)
    if sum(emb) > 1 or (any(emb) and not emb[0]):
        raise ConfigError(f"stage layout {text!r}: the embedding E belongs on the first stage only, found on stage(s) "
                          f"{[k for k, e in enumerate(emb) if e]}")
    if sum(head) > 1 or (any(head) and not head[-1]):
        raise ConfigError(f"stage layout {text!r}: the LM head and loss L belong on the last stage only, found on stage(s) "
                          f"{[k for k, h in enumerate(head) if h]}")
    if num_stages is not None and len(stages) != num_stages:
        raise ConfigError(f"stage layout {text!r} has {len(stages)} stage(s), but the pipeline has {num_stages} "
                          "(p x v; for interleaved schedules list every virtual stage, in model order)")
    if num_layers is not None and sum(layers) != num_layers:
        raise ConfigError(f"stage layout {text!r} holds {sum(layers)} transformer layer(s), but the model has {num_layers}")
    return StageLayout(text, tuple(layers), tuple(emb), tuple(head))
