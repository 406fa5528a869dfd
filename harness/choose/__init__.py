"""Choose a configuration: rank schedules, micro-batch counts, chunks, stage layouts and recomputation
by predicted step time under a memory limit (``python -m harness choose``, docs/choose.md).

The layer sits just below the faces: it evaluates combinations on the analytic path
(:mod:`harness.analysis`, :mod:`harness.runner` on ``sim``), runs the top ones on a backend, and hands
its plain document to :mod:`harness.report`'s page of a choice.
"""
