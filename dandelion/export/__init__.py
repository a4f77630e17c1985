"""dandelion/export."""
