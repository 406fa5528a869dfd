"""What model a case ran, as the page labels it: every field that tells two cases' models apart.

A case's model is its cost model (every field the results document holds for it: sizes, TFLOP/s,
vocabulary, layout, layers per stage, recomputation, memory terms, the link), the case options that
change it (:func:`harness.report.cost_table.model_notes`), its memory limit, its communication model
and placement, and its backend and workload. The page keys chart series, the overview's "model /
cost" column and the comparison's "same model" on all of it (:func:`model_key`), so two cases that
differ in any of it are never merged into one dot or called the same model; it labels each case with
the short form (:func:`cost_label`) plus whatever else tells it apart from the other cases on the
page (:func:`model_labels`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from harness.report.cost_table import model_notes

__all__ = ["cost_label", "isolated", "model_differences", "model_fields", "model_key", "model_labels"]

#: Unicode's first-strong isolate and pop-directional isolate: a user string between them cannot
#: reorder the text around it (where no ``<bdi>`` can go: SVG ``<title>`` tooltips, canvas text).
_FSI, _PDI = "\u2068", "\u2069"


def isolated(text: str) -> str:
    """``text`` between U+2068 and U+2069, so a right-to-left override in it stays inside it."""
    return f"{_FSI}{text}{_PDI}"


def _ms(ns: Any) -> str:
    if isinstance(ns, bool) or not isinstance(ns, (int, float)):
        return "?"
    return f"{ns / 1e6:g}"


#: The cost fields :func:`cost_label` shows itself, per model (others are shown where they differ).
_SHOWN = {
    "transformer": {"model", "hidden_size", "num_layers", "seq_len", "tflops", "vocab_size", "layout", "layers_per_stage",
                    "recompute", "tensor_parallel_size", "sequence_parallel", "flash_attention", "p2p_latency_ns",
                    "p2p_gbytes_per_s", "unshard_ns", "reshard_ns", "reduce_grad_ns", "overlap_ns", "overlap_ratio"},
    "fixed": {"model", "forward_ns", "backward_ns", "p2p_latency_ns", "p2p_gbytes_per_s", "unshard_ns", "reshard_ns",
              "reduce_grad_ns", "overlap_ns", "overlap_ratio"},
}


def cost_label(cost: Any) -> str:
    """A short description of a results-document cost model, e.g. ``"h=2048 L=24 s=1024 · 400 TFLOP/s"``:
    a transformer's size, tensor/sequence parallelism and flash attention (``TP=8 SP flash``) and speed,
    with its vocabulary (``vocab 50257``), layout or layers per stage (``layout Et*3|t*4``,
    ``layers 7,6,6,5``) and recomputation (``recompute=selective``, per stage ``recompute=full,none``) where set; a fixed
    model's F and B (``F=1 B=2 ms``; per-stage lists as ``1–2``); the point-to-point link when transfers
    cost time (``"+ p2p 10 µs, 25 GB/s"``), the data-parallel jobs' durations where set
    (``"· UNSHARD 0.3 RESHARD 0.2 REDUCE_GRAD 0.7 ms"``, :mod:`harness.model.data_parallel`) and how an
    overlapped F&B group is timed where set (``"· F&B overlap_ratio 0.5"`` or ``"· F&B group 2.5 ms"``
    for ``overlap_ns``, :mod:`harness.plan.groups`). What it leaves out, :func:`model_labels` adds where
    cases differ in it."""
    if not isinstance(cost, dict):
        return ""
    if cost.get("model") == "transformer":
        label = f"h={cost.get('hidden_size')} L={cost.get('num_layers')} s={cost.get('seq_len')}"
        tp = cost.get("tensor_parallel_size")
        if isinstance(tp, int) and tp > 1:  # every figure one GPU's of the group: another model than TP=1's
            label += f" TP={tp}" + (" SP" if cost.get("sequence_parallel") is True else "")
        if cost.get("flash_attention") is True:
            label += " flash"
        if isinstance(cost.get("tflops"), (int, float)):
            label += f" · {cost['tflops']:g} TFLOP/s"
        if cost.get("vocab_size"):
            label += f" · vocab {cost['vocab_size']}"
        if cost.get("layout"):
            label += f" · layout {cost['layout']}"
        elif isinstance(cost.get("layers_per_stage"), list):
            label += " · layers " + ",".join(str(x) for x in cost["layers_per_stage"])
        recompute = cost.get("recompute")
        if isinstance(recompute, str) and recompute != "none":
            label += f" · recompute={recompute}"
        elif isinstance(recompute, list):
            label += " · recompute=" + ",".join(map(str, recompute))
    elif cost.get("model") == "fixed":
        def ms(ns: Any) -> str:
            if isinstance(ns, list) and ns:
                lo, hi = min(ns), max(ns)
                return _ms(lo) if lo == hi else f"{_ms(lo)}–{_ms(hi)}"
            return _ms(ns)
        label = f"F={ms(cost.get('forward_ns'))} B={ms(cost.get('backward_ns'))} ms"
    else:
        label = str(cost.get("model", ""))
    latency, bandwidth = cost.get("p2p_latency_ns") or 0, cost.get("p2p_gbytes_per_s")
    if latency or bandwidth:
        label += f" + p2p {latency / 1000:g} µs" + (f", {bandwidth:g} GB/s" if bandwidth else "")
    dp = [f"{kind} {cost[key] / 1e6:g}" for key, kind in (("unshard_ns", "UNSHARD"), ("reshard_ns", "RESHARD"),
                                                          ("reduce_grad_ns", "REDUCE_GRAD")) if isinstance(cost.get(key), (int, float)) and cost[key]]
    if dp:
        label += " · " + " ".join(dp) + " ms"
    if isinstance(cost.get("overlap_ns"), (int, float)):
        label += f" · F&B group {cost['overlap_ns'] / 1e6:g} ms"
    elif isinstance(cost.get("overlap_ratio"), (int, float)):
        label += f" · F&B overlap_ratio {cost['overlap_ratio']:g}"
    return label


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def model_fields(case: dict[str, Any]) -> dict[str, str]:
    """Every field of ``case`` that describes the model it ran (module doc), flat, values as compact
    JSON text: ``{"cost.tflops": "400", "option.overlap": "false", "memory limit": "9663676416", ...}``."""
    out: dict[str, str] = {}
    cost = case.get("cost")
    if isinstance(cost, dict):
        out.update({f"cost.{k}": _compact(v) for k, v in cost.items()})
    options = case.get("options")
    if isinstance(options, dict):
        out.update({f"option.{k}": _compact(v) for k, v in options.items()})
    memory = case.get("memory")
    if isinstance(memory, dict) and memory.get("limit_bytes") is not None:
        out["memory limit"] = _compact(memory["limit_bytes"])
    params = (case.get("schedule") or {}).get("params")
    if isinstance(params, dict):
        out.update({f"schedule.{k}": _compact(v) for k, v in params.items() if k not in ("v", "comm")})
    out["comm model"] = str(case.get("comm_model") or "stream")
    device = case.get("device") if isinstance(case.get("device"), dict) else {}
    out["backend"] = str(case.get("backend", ""))
    out["workload"] = str((device or {}).get("workload") or "")
    return out


def model_key(case: dict[str, Any]) -> str:
    """One string equal for two cases exactly when :func:`model_fields` are (the series and "same model" key)."""
    return json.dumps(sorted(model_fields(case).items()), ensure_ascii=False)


def _shown_field(key: str, value: str) -> str:
    if key == "memory limit":
        try:
            return f"limit {int(value) / 2**30:g} GiB"
        except ValueError:
            return f"limit {value}"
    name = key.split(".", 1)[-1]
    return f"{name}={value}"


def _absent_field(key: str) -> str:
    """How a case that lacks ``key`` reads beside cases that have it: ``no limit``, an option left to the
    builder's default (``microbatch_group_size_per_vp_stage=default``); ``""`` for the rest (a cost field one
    case's model has reads on that case's label, which tells the two apart)."""
    if key == "memory limit":
        return "no limit"
    if key.startswith("option."):
        return f"{key[len('option.'):]}=default"
    return ""


#: Fields the page shows elsewhere beside the model (a case's backend and communication model have columns).
_ELSEWHERE = {"backend", "workload", "comm model"}

#: Schedule fields that a case lacks because of its communication model (no send/receive jobs, no placement):
#: the communication model's column tells such cases apart, their absence says nothing more.
_COMM_FIELDS = {"schedule.comm_placement", "schedule.comm_model"}


def _scope(key: str, case: dict[str, Any]) -> str:
    """Among which cases ``key``'s absence is a difference: a cost field among cases of one cost model (a
    fixed model has no ``hidden_size``), a schedule option among cases of one schedule (1F1B has no
    ``microbatch_group_size_per_vp_stage``), the memory limit among the cases that model memory."""
    if key == "memory limit":
        return "memory" if isinstance(case.get("memory"), dict) else "no memory model"
    if key.startswith("cost."):
        cost = case.get("cost")
        return "cost:" + str(cost.get("model") if isinstance(cost, dict) else "")
    if key.startswith(("option.", "schedule.")):
        return "schedule:" + str((case.get("schedule") or {}).get("name"))
    return ""


def _value_text(key: str, value: str | None) -> str:
    """One side of a difference: the value as a field holds it, the memory limit in GiB, an absent field as
    the page reads it (``no limit``, ``default`` for a schedule option) else ``(not set)``."""
    if value is None:
        if key == "memory limit":
            return "no limit"
        return "default" if key.startswith("option.") else "(not set)"
    if key == "memory limit":
        return _shown_field(key, value).removeprefix("limit ")
    return value


def model_differences(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between the models two results-document cases ran, one text per field of
    :func:`model_fields` (the fields the page keys a model on): ``"forward_ns 1000000 vs 1200000"`` (values
    as the file holds them; ``_ns`` fields in ns, ``_bytes`` in bytes), ``"memory limit 9 GiB vs no limit"``,
    ``"comm model 'stream' vs 'edge'"``; empty when the models are the same.

    Left out: backend and workload (``compare``'s setup warning names them), and the schedule's options
    and parameters where the two cases are of different schedules (they belong to each schedule)."""
    a, b = model_fields(base), model_fields(new)
    names = ((base.get("schedule") or {}).get("name"), (new.get("schedule") or {}).get("name"))
    out = []
    for key in [*a, *(k for k in b if k not in a)]:
        if key in ("backend", "workload") or (names[0] != names[1] and key.startswith(("option.", "schedule."))):
            continue
        if a.get(key) != b.get(key):
            name = key.split(".", 1)[-1] if key.startswith(("cost.", "option.", "schedule.")) else key
            out.append(f"{name} {_value_text(key, a.get(key))} vs {_value_text(key, b.get(key))}")
    return out


def model_labels(cases: Sequence[dict[str, Any]]) -> list[str]:
    """Per case, its :func:`cost_label` followed by each other model field in which the cases on the page
    differ (``"h=2048 L=24 s=1024 · 400 TFLOP/s · num_attention_heads=32 · limit 9 GiB"``), so two cases
    of different models never read the same.

    A field that some cases have and others lack is a difference too: a case without a memory limit
    beside one with a limit reads ``no limit``; a schedule option set on one case (shown as
    :func:`harness.report.cost_table.model_notes` shows it, ``microbatch_group_size_per_vp_stage=8``) reads
    ``microbatch_group_size_per_vp_stage=default`` on a case of the same schedule without it, and a cost field
    one case's model has and another's of the same cost model lacks is shown on the first. Absence counts only among cases the field applies to (a
    1F1B case lacks Interleaved1F1B's options, a fixed cost model a transformer's sizes, a case without a
    memory model a limit) and not for the
    send/receive placement, which the communication model decides. Backend, workload and communication
    model are left out (the page shows them in columns of their own).

    Args:
        cases: results-document cases.

    Returns:
        One label per case, in order.
    """
    fields = [model_fields(c) for c in cases]
    option_names = {k[len("option."):] for f in fields for k in f if k.startswith("option.")}
    keys = sorted({k for f in fields for k in f if k not in _ELSEWHERE
                   and not (k.startswith("schedule.") and k[len("schedule."):] in option_names)})  # an option is also a schedule param: once
    differing: dict[str, set[str]] = {}  # key -> the scopes in which it differs
    for k in keys:
        by_scope: dict[str, set[str | None]] = {}
        for c, f in zip(cases, fields):
            by_scope.setdefault(_scope(k, c), set()).add(f.get(k))
        scopes = {s for s, values in by_scope.items() if len(values) > 1 and (k not in _COMM_FIELDS or len(values - {None}) > 1)}
        if scopes:
            differing[k] = scopes
    out = []
    for case, f in zip(cases, fields):
        cost = case.get("cost") if isinstance(case.get("cost"), dict) else {}
        shown = _SHOWN.get(str((cost or {}).get("model")), {"model"})
        notes = {n.split("=", 1)[0]: n for n in model_notes(case)}
        extra = []
        for k, scopes in differing.items():
            if k.startswith("cost.") and k[5:] in shown and k in f:
                continue  # cost_label shows it
            if k in f:
                extra.append(notes.get(k[len("option."):], _shown_field(k, f[k])) if k.startswith("option.") else _shown_field(k, f[k]))
            elif _scope(k, case) in scopes and k not in _COMM_FIELDS and _absent_field(k):
                extra.append(_absent_field(k))
        base = cost_label(case.get("cost"))
        out.append(" · ".join(x for x in (base, *extra) if x))
    return out
