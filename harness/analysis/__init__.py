"""Figures from run records and plans: metrics, the bubble decomposition, the critical path,
closed-form theory, memory profiles, the schedule's analytic figures, and the compare gate.

:mod:`~harness.analysis.metrics` (step time, busy/idle, bubble), :mod:`~harness.analysis.bubble`,
:mod:`~harness.analysis.critical_path`, :mod:`~harness.analysis.theory`,
:mod:`~harness.analysis.memory`, :mod:`~harness.analysis.analytic` (:func:`~harness.analysis.analytic.analyze`),
:mod:`~harness.analysis.compare`; :mod:`~harness.analysis.result` holds what one case produced.

Imports :mod:`harness.run`, :mod:`harness.plan` and the layers below them; never runs anything itself.
"""
