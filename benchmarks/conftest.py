"""Benchmarks of the harness itself (pytest-benchmark). Run:

    pytest benchmarks/ --benchmark-only

Figures go to pytest-benchmark's table and ``extra_info``; nothing here
asserts a duration.
"""
