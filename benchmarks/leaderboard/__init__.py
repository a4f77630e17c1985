"""benchmarks/leaderboard."""
