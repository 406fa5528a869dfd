"""Importers: other tools' records of pipeline runs, read into the harness's run records.

An importer is a source of run records, like a backend: it returns (or builds) the
same :class:`~harness.records.RunRecords` the executor returns, and metrics, critical
path and reports are computed by the same code for runs and imports.

* :mod:`harness.imports.paddle`: PaddlePaddle's job-profiler worker logs;
* :mod:`harness.imports.torch`: PyTorch ``torch.profiler`` traces of
  ``torch.distributed.pipelining`` runs.
"""
