"""The pytest face: the plugin (:mod:`~harness.pytest.plugin`, registered through the ``pytest11``
entry point), pytest-benchmark glue (:mod:`~harness.pytest.benchmark`), the ``--backend=mpi`` glue
(:mod:`~harness.pytest.mpi`), the pytest-xdist glue (:mod:`~harness.pytest.xdist`)
and the chooser's top rows as parameters (:func:`~harness.pytest.choose.choose_params`). Thin: options
and hooks wired onto :func:`harness.runner.run_case` and :mod:`harness.report`.
"""
