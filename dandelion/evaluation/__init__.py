"""dandelion/evaluation."""
