"""Benchmarks of the poll path, recovery, single-flight, submit latency and memory.

Not part of the test suite: run them with `make bench` (see bench/README.md).
"""
