"""docs/tutorial.ipynb executes from top to bottom (generate, train Dandelion and SFNO, roll out, plot, export and
read back with xarray), and the copy committed for the site carries outputs of every code cell."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "tutorial.ipynb"


def test_committed_notebook_has_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("outputs") for c in code[1:]), "run the notebook and commit it with its outputs"
    assert not any(o.get("output_type") == "error" for c in code for o in c["outputs"])


def test_tutorial_executes(tmp_path, monkeypatch):
    monkeypatch.setenv("DANDELION_TUTORIAL_DIR", str(tmp_path))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    assert (tmp_path / "tutorial_forecasts.nc").is_file()
    assert (tmp_path / "runs" / "dandelion" / "best.pt").is_file() and (
        tmp_path / "runs" / "sfno" / "best.pt"
    ).is_file()
