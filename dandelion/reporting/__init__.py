"""dandelion/reporting."""
