"""benchmarks/budget."""
