"""Ctrl-C ends a job with one line saying where its state is and how to continue, exit status 130."""

from __future__ import annotations

import pytest

from dandelion.cli import generate, verify
from dandelion.datasets import generate as generate_module

GEN = ["dataset=solid_body", "dataset.n_trajectories=5", "dataset.n_frames=6", "progress=false", "device=cpu"]


def test_ctrl_c_in_generate_names_the_folder_and_the_rerun(tmp_path, monkeypatch, capsys):
    out = tmp_path / "data"
    real = generate_module._run

    def interrupted(scenario, root, ids, *args, **kwargs):
        real(scenario, root, ids[:2], *args, **kwargs)  # two files are done, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(generate_module, "_run", interrupted)
    with pytest.raises(SystemExit) as info:
        generate.main([*GEN, f"dataset.path={out}"])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 130 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("dandelion-generate: error: interrupted: state in") and str(out) in err
    assert "rerun the same command" in err
    assert len(list(out.glob("*/*.h5"))) == 2 and not (out / ".dandelion.lock").exists()
    monkeypatch.setattr(generate_module, "_run", real)
    generate.main([*GEN, f"dataset.path={out}"])  # the rerun finishes it
    capsys.readouterr()
    assert verify.main([str(out)]) == 0
