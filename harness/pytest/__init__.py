"""The pytest face: the plugin (:mod:`~harness.pytest.plugin`, registered through the ``pytest11``
entry point), pytest-benchmark glue (:mod:`~harness.pytest.benchmark`), the ``--backend=mpi`` glue
(:mod:`~harness.pytest.mpi`) and the pytest-xdist glue (:mod:`~harness.pytest.xdist`). Thin: options
and hooks wired onto :func:`harness.runner.run_case` and :mod:`harness.report`.
"""
