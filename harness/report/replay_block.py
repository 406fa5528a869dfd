"""The page's "run beside its schedule" block for an imported run (:mod:`harness.imports.replay`).

One self-contained HTML fragment per case that has a ``replay`` field: the measured
step and bubble beside the simulated ones of the same action order with the fitted
costs, the difference split into jitter, host overhead between actions and waiting
on transfers, and (for torch imports) the wait share inside the compute ranges.
Every value is escaped; the fragment uses the page's ``meta`` class only.
"""

from __future__ import annotations

from html import escape
from typing import Any

__all__ = ["replay_block"]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms"


#: What each communication model of the replay means, for the block's title.
_COMM_TEXT = {"stream": "send/receive jobs on their own streams",
              "edge": "the fitted transfer time as a delay on cross-rank dependencies"}


def replay_block(case: dict[str, Any]) -> str | None:
    """The HTML fragment for ``case``'s ``replay`` (and ``torch_import``) fields, or ``None`` without them."""
    rep = case.get("replay")
    if not isinstance(rep, dict):
        return None
    ref = rep.get("reference_step", rep.get("median_step"))
    n_steps = len(rep.get("steps") or [])
    try:
        rows = [
            (f"measured, step {ref} ({_which_step(n_steps)})" if n_steps > 1 else f"measured, step {ref}",
             _ms(rep["measured_step_ns"]) + (f" (spread over steps {_ms(rep['measured_step_spread_ns'])})"
                                             if n_steps > 1 else ""),
             f"{100 * rep['measured_bubble']:.1f} %"),
            ("simulated: same order, fitted costs", _ms(rep["simulated_step_ns"]), f"{100 * rep['simulated_bubble']:.1f} %"),
        ]
        parts = [("jitter (durations off their median)", rep["jitter_ns"]),
                 ("host overhead between actions", rep["host_overhead_ns"]),
                 ("waiting on transfers (and the rest)", rep["transfer_wait_ns"])]
        if rep.get("unexplained_ns"):
            parts.append(("unexplained (the parts above would be negative: clock offsets that break causality?)",
                          rep["unexplained_ns"]))
    except (KeyError, TypeError):
        return None
    imp = case.get("torch_import") if isinstance(case.get("torch_import"), dict) else {}
    model = str(rep.get("comm_model", ""))
    out = ['<details class="meta replay" open><summary>the run beside its schedule '
           f'(comm {escape(model)}: {escape(_COMM_TEXT.get(model, "transfers as recorded"))})</summary><table class="replay">',
           "<tr><th class=\"l\"></th><th>step</th><th>bubble</th></tr>"]
    out += [f"<tr><td class=\"l\">{escape(a)}</td><td>{escape(b)}</td><td>{escape(c)}</td></tr>" for a, b, c in rows]
    med = next((s for s in rep.get("steps") or [] if isinstance(s, dict) and s.get("step") == ref), None)
    shown = (f"step {escape(str(ref))} measured {escape(_ms(med['measured_ns']))} - simulated "
             f"{escape(_ms(rep['simulated_step_ns']))} = " if med else "")
    out.append("</table><div>difference: " + shown + escape(_ms(rep.get("difference_ns", 0))) + ": "
               + ", ".join(f"{escape(name)} {escape(_ms(ns))}" for name, ns in parts) + "</div>")
    if imp and not imp.get("inferred"):
        waits = imp.get("wait_ns_per_rank") or []
        out.append("<div>waiting inside compute ranges (range start to first operator), per rank over the imported steps: "
                   + escape(", ".join(_ms(w) for w in waits)) + "</div>")
    if imp:
        if imp.get("inferred"):
            out.append("<div><b>inferred</b>: the trace marks no actions (Schedule1F1B); F and B were rebuilt from "
                       "operator events</div>")
        clock = imp.get("clock") or {}
        if clock.get("note"):
            out.append(f"<div>clocks: {escape(str(clock['note']))}</div>")
    out.append("</details>")
    return "".join(out)


def _which_step(n_steps: int) -> str:
    """The replay's reference step among ``n_steps`` (:func:`harness.imports.replay.replay`): the
    median step of an odd number, else the lower (shorter) of the two middle ones."""
    from harness.analysis.critical_path import middle_step_note

    return f"the median step of {n_steps}" if n_steps % 2 else middle_step_note(n_steps)
