"""``dandelion-bench target=export``: peak resident memory (RSS) of ``dandelion-export`` runs, each a fresh process.

For each ``[max_inits, n_steps]`` of ``export.runs`` (``max_inits`` null: every initial frame), ``dandelion-export``
writes the forecasts of ``export.checkpoint`` on ``export.dataset_path``'s ``export.split`` (``include_truth``,
``batch_size``; ``dataset=export.dataset`` where set) to a temporary file, with ``OMP_NUM_THREADS=export.threads``;
its peak resident set size is the ``ru_maxrss`` that :func:`os.wait4` returns for that process (the number
``/usr/bin/time -v`` prints as "Maximum resident set size", in KiB), next to the wall seconds, the forecasts written
and the file's size. A first row, ``imports``, is a process that only imports the job's modules: the part of every
peak that does not depend on the export. Streaming keeps the rest to one rollout batch and one forecast's Dataset
(:mod:`dandelion.export.stream`): the peak grows with the batch, not with the number of forecasts. Linux (``wait4``).
Use::

    dandelion-bench target=export export.checkpoint=RUN/best.pt export.dataset_path=DIR export.dataset=solid_body
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["peak_rss", "export_args", "bench_export", "markdown"]

#: What the ``imports`` row runs: the modules of the job, a Dandelion checkpoint's model and the streaming writer.
IMPORTS = "import dandelion.cli.export, dandelion.checkpoint, dandelion.export.stream, dandelion.model"


#: Runs ``argv[1:]`` and prints its peak RSS and exit code last. A process's ``ru_maxrss`` starts from the memory
#: of the process it was forked from (Linux keeps the larger of the two across fork and exec), so the measured
#: command is started by this small process, not by the benchmark's (which holds torch: 600 MB).
_LAUNCHER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:])\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "print(f'\\n__peak_rss_kib {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}', flush=True)\n"
)


def peak_rss(argv: list[str], env: dict | None = None) -> dict:
    """Run ``argv`` to its end; ``{"peak_rss_kib", "wall_s", "returncode", "stdout"}`` (stderr goes to stdout).

    The peak is the process's ``ru_maxrss`` from :func:`os.wait4` (KiB on Linux), children it waited for included,
    the process started from a small launcher (:data:`_LAUNCHER`) so that the caller's memory does not count.
    """
    t0 = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    out, _, last = run.stdout.rstrip("\n").rpartition("\n")
    if not last.startswith("__peak_rss_kib "):
        raise RuntimeError(f"the launcher of {argv[0]} did not report ({run.returncode}): {run.stdout[-2000:]}")
    kib, code = (int(v) for v in last.split()[1:])
    return {"peak_rss_kib": kib, "wall_s": time.perf_counter() - t0, "returncode": code, "stdout": out}


def export_args(c, output: Path, max_inits, n_steps: int) -> list[str]:
    """The ``dandelion-export`` arguments of one run."""
    args = [f"checkpoint={c.checkpoint}"] + ([f"dataset={c.dataset}"] if c.get("dataset") else [])
    args += [
        f"dataset.path={c.dataset_path}",
        f"split={c.split}",
        f"output={output}",
        f"n_steps={int(n_steps)}",
        f"include_truth={str(bool(c.include_truth)).lower()}",
        f"batch_size={int(c.batch_size)}",
        "overwrite=true",
    ]
    return args + ([] if max_inits is None else [f"max_inits={int(max_inits)}"])


def _export_script() -> list[str]:
    """``dandelion-export``: the console script beside this Python, else ``python -m dandelion.cli.export``."""
    script = Path(sys.executable).with_name("dandelion-export")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dandelion.cli.export"]


def bench_export(c, device: str, save: Callable[[dict], None] | None = None, out: dict | None = None) -> dict:
    """``target=export`` for the ``export`` config section ``c`` (see the module docstring).

    Raises
    ------
    ValueError
        Without ``export.checkpoint`` and ``export.dataset_path``, on another device than the CPU, or when an
        export fails (its output's last lines in the message).
    """
    if not c.get("checkpoint") or not c.get("dataset_path"):
        raise ValueError("target=export needs export.checkpoint=RUN/best.pt and export.dataset_path=DIR")
    if device != "cpu":
        raise ValueError("target=export measures the CPU job's resident memory: use device=cpu")
    out = {} if out is None else out
    rows = out.setdefault("rows", [])
    env = {**os.environ, "OMP_NUM_THREADS": str(int(c.threads))}
    r = peak_rss([sys.executable, "-c", IMPORTS], env)
    rows.append({"run": "imports", "peak_rss_kib": r["peak_rss_kib"], "wall_s": r["wall_s"]})
    with tempfile.TemporaryDirectory(prefix="bench_export_") as tmp:
        for max_inits, n_steps in c.runs:
            path = Path(tmp) / "forecasts.nc"
            args = export_args(c, path, max_inits, n_steps)
            cmd = _export_script() + args
            r = peak_rss(cmd, env)
            if r["returncode"] != 0:
                raise ValueError(f"{' '.join(cmd)} failed ({r['returncode']}): {r['stdout'][-2000:]}")
            wrote = re.search(r"wrote (\d+) forecasts", r["stdout"])
            rows.append(
                {
                    "run": f"{'all' if max_inits is None else int(max_inits)} x {int(n_steps)}",
                    "max_inits": max_inits,
                    "n_steps": int(n_steps),
                    "forecasts": int(wrote.group(1)) if wrote else None,
                    "peak_rss_kib": r["peak_rss_kib"],
                    "wall_s": r["wall_s"],
                    "file_bytes": path.stat().st_size,
                    "command": shlex.join(["dandelion-export", *args]),
                }
            )
            path.unlink()
            if save:
                save(out)
    print(markdown(rows), flush=True)
    return out


def markdown(rows: list[dict]) -> str:
    """The table of ``benchmarks/speed/README.md``: one line per run, peak RSS in MiB (KiB / 1024)."""
    lines = ["| run | forecasts x steps | peak RSS MiB | wall s | file MB |", "|---|---|---:|---:|---:|"]
    for r in rows:
        shape = "-" if r["run"] == "imports" else f"{r['forecasts']} x {r['n_steps']}"
        size = "-" if "file_bytes" not in r else f"{r['file_bytes'] / 1e6:.0f}"
        lines.append(f"| {r['run']} | {shape} | {r['peak_rss_kib'] / 1024:,.0f} | {r['wall_s']:.1f} | {size} |")
    return "\n".join(lines)
