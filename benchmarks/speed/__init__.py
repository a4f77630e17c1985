"""benchmarks/speed."""
