"""Full disks, read-only folders and odd configuration values (issue #70 items 5 and 7): one line naming the path or
the value, status 2, no temporary file left, nothing complete damaged, no folder made for a refused value."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import textwrap

import pytest
from cli_result import one_line_error

from dandelion.cli import generate, train

SOLID = ["dataset=solid_body", "device=cpu", "progress=false"]


@contextlib.contextmanager
def mounted(path, options: str):
    """A small tmpfs at ``path`` (needs root and a kernel that lets this process mount); skips the test otherwise."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()[:80]}): needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], capture_output=True)


def _hidden(root):
    return [p for p in root.rglob(".*") if p.name.endswith(".tmp")]


def test_generation_onto_a_full_disk_is_one_line_and_leaves_no_temporary_file(tmp_path, capsys):
    with mounted(tmp_path / "small", "size=3m") as disk:
        out = disk / "sb"
        argv = [*SOLID, f"dataset.path={out}", "dataset.nlat=64", "dataset.nlon=128", "dataset.n_frames=40"]
        err = one_line_error(generate.main, argv, capsys)
        assert str(out) in err and "free" in err and "MB" in err, err
        assert not _hidden(disk)


@pytest.mark.parametrize("job", ["generate", "train"])
def test_a_read_only_folder_is_refused_before_any_work(tmp_path, capsys, make_tiny_dataset, job):
    data = make_tiny_dataset(tmp_path / "data")
    with mounted(tmp_path / "ro", "size=1m,ro") as ro:
        if job == "generate":
            err = one_line_error(generate.main, [*SOLID, f"dataset.path={ro / 'sb'}"], capsys)
            assert "dataset.path" in err and "Read-only" in err, err
        else:
            argv = [f"dataset.path={data}", f"run_dir={ro / 'run'}", "model.name=_pointwise_test", "trainer=quick"]
            err = one_line_error(train.main, [*argv, "device=cpu", "model.preset=tiny"], capsys)
            assert "run_dir" in err and "Read-only" in err and "No such file" not in err, err


def test_a_checkpoint_over_the_file_size_limit_is_one_line_and_the_old_one_survives(tmp_path):
    """``ulimit -f``: torch's writer fails without an errno; the one line names the checkpoint and the limit."""
    code = textwrap.dedent(
        f"""
        import torch
        from dandelion.checkpoint import save_checkpoint
        path = {str(tmp_path / "last.pt")!r}
        save_checkpoint(path, model=torch.nn.Linear(2, 2), config={{}}, stats={{}}, grid={{}}, step=0, epoch=0)
        old = open(path, "rb").read()
        try:
            big = torch.nn.Linear(1000, 1000)
            save_checkpoint(path, model=big, config={{}}, stats={{}}, grid={{}}, step=1, epoch=1)
        except OSError as err:
            print(type(err).__name__, err)
        assert open(path, "rb").read() == old
        """
    )

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=limit)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("DiskFullError") and "last.pt" in done.stdout and "ulimit -f" in done.stdout
    assert sorted(os.listdir(tmp_path)) == ["last.pt"]


@pytest.mark.parametrize(
    "override, words",
    [
        ("dataset.dt_frame=0", ["dataset.dt_frame=0", "positive and finite"]),
        ("dataset.dt_frame=nan", ["dataset.dt_frame=nan", "positive and finite"]),
        ("dataset.n_frames=1", ["dataset.n_frames=1", "2 frames", "n_in + 1"]),
        ("dataset.nlat=100000", ["dataset.nlat=100000", "GB", "lower dataset.nlat"]),
    ],
)
def test_odd_values_are_refused_before_anything_is_written(tmp_path, capsys, override, words):
    out = tmp_path / "sb"
    extra = ["dataset.nlon=200000"] if "nlat" in override else []
    err = one_line_error(generate.main, [*SOLID, f"dataset.path={out}", override, *extra], capsys)
    assert all(w in err for w in words), err
    assert not out.exists()
