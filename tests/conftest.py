"""Shared test fixtures.

``make_tiny_dataset(path, ...)`` (fixture of the same name, a factory) writes a tiny dataset folder
in the docs/ARCHITECTURE.md layout; see ``tests/helpers/tiny_dataset.py``, which test modules may import as
``tiny_dataset`` (this file puts ``tests/helpers`` on ``sys.path``)::

    def test_something(make_tiny_dataset, tmp_path):
        path = make_tiny_dataset(tmp_path / "data", nlat=9, nlon=16)
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "helpers"))

from tiny_dataset import make_tiny_dataset as _make_tiny_dataset  # noqa: E402


@pytest.fixture
def make_tiny_dataset():
    """The :func:`tiny_dataset.make_tiny_dataset` function."""
    return _make_tiny_dataset
