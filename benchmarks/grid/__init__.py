"""benchmarks/grid."""
