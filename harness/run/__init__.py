"""Running a plan: the executor, the profiling window, the ``sim`` replay, and the local devices.

:mod:`~harness.run.executor` runs a plan on a device (:mod:`harness.run.device`: ``sim``, ``cpu``,
``cuda``) for a number of steps and times every job; :mod:`~harness.run.replay` is the ``sim``
backend's fast path over the analytic timeline; :mod:`~harness.run.window` says which steps are warm-up
and which are recorded; :mod:`~harness.run.stability` flags timed figures that cannot be trusted;
:mod:`~harness.run.environment` records the machine and how busy it was.

Imports :mod:`harness.plan` and the layers below it, never the analysis or the reports.
"""
