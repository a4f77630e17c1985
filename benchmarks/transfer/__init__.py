"""benchmarks/transfer."""
