"""Importers: other tools' records of pipeline runs, read into the harness's run records.

An importer is a source of run records, like a backend: it returns (or builds) the
same :class:`~harness.records.RunRecords` the executor returns, and metrics, critical
path and reports are computed by the same code for runs and imports.

* :mod:`harness.imports.paddle`: PaddlePaddle's job-profiler worker logs (its parts:
  :mod:`~harness.imports.paddle_log` reads lines and files, :mod:`~harness.imports.paddle_steps`
  cuts steps and checks micro-batch ids, :mod:`~harness.imports.paddle_export` writes logs);
* :mod:`harness.imports.torch`: PyTorch ``torch.profiler`` traces of
  ``torch.distributed.pipelining`` runs.
"""
