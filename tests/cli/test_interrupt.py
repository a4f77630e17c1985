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


def test_a_closed_stdout_pipe_ends_the_job_quietly():
    """``dandelion-benchmark dry_run=true | head -1``: the reader leaves early; no traceback, status 141 (SIGPIPE)."""
    import subprocess
    import sys

    from dandelion.cli.common import BROKEN_PIPE

    code = (
        "from dandelion.cli.common import guard\n"
        "with guard('dandelion-benchmark', in_job=True):\n"
        "    for i in range(200000):\n"
        "        print(f'line {i}: a cell and its state')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b"line 0")
    proc.stdout.close()  # the reader goes away, as head does after its first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == BROKEN_PIPE, err
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err


def test_a_broken_pipe_that_is_not_stdout_still_propagates():
    """A job writing to another pipe whose reader died (a worker's, a socket) gets the traceback, not the quiet exit
    of ``| head``: stdout's reader is still there, so the error is the job's, status 1."""
    import subprocess
    import sys

    code = (
        "import os\n"
        "from dandelion.cli.common import guard\n"
        "r, w = os.pipe()\n"
        "os.close(r)\n"
        "with guard('dandelion-train', in_job=True):\n"
        "    print('started', flush=True)\n"
        "    os.write(w, b'x')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    err = proc.stderr.decode()
    assert proc.stdout.startswith(b"started") and proc.returncode == 1, err
    assert "BrokenPipeError" in err and "Traceback" in err, err
