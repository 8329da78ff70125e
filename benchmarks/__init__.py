"""Benchmarks for mongio (run as modules, e.g. ``python -m benchmarks.bson_bench``)."""
