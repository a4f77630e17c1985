"""dandelion/training."""
