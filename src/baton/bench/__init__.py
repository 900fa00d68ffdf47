"""Benchmarks that ship with Baton: harnesses that run public workloads through a `Team`."""
