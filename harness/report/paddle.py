"""Old home of the PaddlePaddle importer, kept so that ``harness.report.paddle`` imports still work.

The importer is :mod:`harness.imports.paddle` (importers are sources of run
records, not report writers). This module *is* that module: importing it binds
the same module object, so every name (and any patch of one) is shared.
"""

import sys

from harness.imports import paddle as _paddle

sys.modules[__name__] = _paddle
