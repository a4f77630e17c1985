"""dandelion-generate under torchrun (2 CPU ranks, gloo, torchrun's environment set by hand): a refusal on rank 0
before the first collective reaches every rank, none is left waiting."""

import json
import os
import socket
import subprocess
import sys

import pytest

RANK = """
import json, sys
from dandelion.datasets.generate import generate
cfg = {"dataset": {"name": "solid_body", "path": sys.argv[1], "nlat": 8, "nlon": 16, "n_trajectories": 2,
       "n_frames": 2}, "device": "cpu", "batch_size": 2, "progress": False}
try:
    generate(cfg)
    out = None
except Exception as err:
    out = [type(err).__name__, str(err)]
print("RESULT " + json.dumps(out))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_foreign_folder_is_refused_on_every_rank(tmp_path):
    root = tmp_path / "mine"
    root.mkdir()
    (root / "notes.txt").write_text("precious")
    port = _free_port()
    procs = []
    for rank in range(2):
        env = {
            **os.environ,
            "WORLD_SIZE": "2",
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
        cmd = [sys.executable, "-c", RANK, str(root)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    results = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=60)
            line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
            assert line, out
            results.append(json.loads(line[-1][len("RESULT ") :]))
    except subprocess.TimeoutExpired:
        pytest.fail(f"rank {len(results)} still runs after 60 s: it waits for a broadcast rank 0 never sent")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert results[0][0] == "ValueError" and "not empty" in results[0][1]
    assert results[1] == results[0]  # the same type and message on rank 1
    assert sorted(p.name for p in root.iterdir()) == ["notes.txt"]
