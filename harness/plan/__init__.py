"""From a schedule to a validated dependency graph, its enqueue order and its analytic timeline.

:mod:`~harness.plan.build` (:func:`~harness.plan.build.build_plan`, :func:`~harness.plan.build.validate`)
builds a :class:`~harness.plan.graph.Plan` on the fast path (:mod:`~harness.plan.fast`) or, for the
detailed error, the reference path (:mod:`~harness.plan.reference`); :mod:`~harness.plan.groups` runs
overlapped job groups; :mod:`~harness.plan.delays` gives the ``edge`` model's transfer delays and
:mod:`~harness.plan.timeline` times a plan under a cost model without running it.

Imports :mod:`harness.records`, :mod:`harness.model`, :mod:`harness.schedule` and the base modules.
"""
