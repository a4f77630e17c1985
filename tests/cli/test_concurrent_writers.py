"""Two writers of one output: per-process temporary names, one lock per output folder; the second writer is refused
in one line (exit status 2) naming the holder and its lock file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from cli_result import one_line_error
from tiny_checkpoint import hold_lock

from dandelion.cli import generate, verify
from dandelion.datasets import storage

GEN = ["dataset=solid_body", "dataset.n_trajectories=5", "dataset.n_frames=6", "progress=false", "device=cpu"]


def test_temporary_names_carry_the_process_id(tmp_path):
    final = tmp_path / "train" / "traj_000001.h5"
    tmp = storage.temp_path(final)
    assert tmp.parent == final.parent and tmp.name.startswith(".traj_000001.h5.") and str(os.getpid()) in tmp.name
    child = subprocess.run(
        [sys.executable, "-c", f"from dandelion.datasets import storage; print(storage.temp_path({str(final)!r}))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert child != str(tmp)


def test_second_generate_into_a_folder_is_refused_and_the_first_sound(tmp_path, capsys):
    out = tmp_path / "data"
    holder = hold_lock(out, "dandelion-generate")
    try:
        err = one_line_error(generate.main, [*GEN, f"dataset.path={out}"], capsys)
    finally:
        holder.kill()
        holder.wait()
    assert f"pid {holder.pid}" in err and socket.gethostname() in err and "started" in err
    assert str(out / ".dandelion.lock") in err and "wait for it to finish or stop it" in err
    assert not (out / "dataset.yaml").exists() and not any(out.glob("*/*.h5"))
    # the holder is gone (killed: its lock file stays, its flock went with it): the next run takes the folder over
    generate.main([*GEN, f"dataset.path={out}"])
    assert not (out / ".dandelion.lock").exists()
    capsys.readouterr()
    assert verify.main([str(out)]) == 0


def test_leftovers_of_a_killed_writer_are_removed_by_the_next_run(tmp_path, capsys):
    out = tmp_path / "data"
    generate.main([*GEN, f"dataset.path={out}"])
    victim = sorted(out.glob("train/*.h5"))[0]
    leftover = victim.with_name(f".{victim.name}.999999.tmp")
    leftover.write_bytes(b"half a file")
    victim.unlink()
    generate.main([*GEN, f"dataset.path={out}"])
    assert victim.is_file() and not leftover.exists()
    capsys.readouterr()
    assert verify.main([str(out)]) == 0
