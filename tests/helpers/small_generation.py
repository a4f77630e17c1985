"""Generate a small dataset folder from Python, as ``dandelion-generate`` would (CPU, no progress bar)."""

from dandelion.datasets.generate import generate


def generate_folder(path, dataset: dict, splits=None):
    """Write the dataset ``dataset`` (a dataset config: ``name`` and overrides) into ``path``; returns ``path``.

    ``splits`` names the splits to make (for example ``["test"]``), or None for the usual split rule.
    """
    generate(
        {
            "dataset": {**dataset, "path": str(path)},
            "device": "cpu",
            "batch_size": 4,
            "progress": False,
            "splits": splits,
        }
    )
    return path
