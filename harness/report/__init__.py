"""Reports: Chrome-trace JSON per case, a versioned results file, an HTML page
(and the chooser's page, :mod:`harness.report.choose_page`).

Everything here reads plain data (the results document of
:mod:`harness.report.results`), so reports can be re-rendered from a saved
results file without running anything.
"""
