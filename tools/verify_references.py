"""Recompute the persistence and linear-AR references of benchmark datasets on the data now on disk and
compare them with the committed reference JSONs: a check that a regenerated dataset is the one the committed
cells were scored on (identical references need identical test and train splits).

    OMP_NUM_THREADS=1 .venv/bin/python tools/verify_references.py held_suarez_32x64 [KEY ...] [--write] [scale=cpu]

Prints, per key and reference, the committed and recomputed next-step and 1:20 VRMSE and whether every
summary is identical. With ``--write`` the committed JSONs are replaced by the recomputed ones (which then
carry ``data_sha256``). Exits 1 if any reference differs.
"""
import json
import sys
import tempfile
from pathlib import Path

from omegaconf import OmegaConf

from dandelion.benchmarks import benchmark as B
from dandelion.benchmarks.references import linear_ar_reference, persistence_reference


def main(argv: list[str]) -> int:
    write = "--write" in argv
    scale = next((a.split("=", 1)[1] for a in argv if a.startswith("scale=")), "cpu")
    keys = [a for a in argv if a != "--write" and not a.startswith("scale=")]
    cfg = B.compose("benchmark", [f"scale={scale}"])
    OmegaConf.set_struct(cfg, False)
    committed = Path(str(cfg.scale.results_dir))
    if not write:
        cfg.scale.results_dir = tempfile.mkdtemp()
    bad = 0
    for key in keys:
        path = B.dataset_spec(cfg, key)["path"]
        for name, fn in (("persistence", persistence_reference), ("linear_ar", linear_ar_reference)):
            old = json.loads((committed / key / f"{name}.json").read_text())
            new = fn(cfg, key, path)
            same = old["next_step"] == new["next_step"] and old["rollout_mean"] == new["rollout_mean"]
            bad += not same
            print(f"{key} {name}: next step {old['next_step']['vrmse']['mean']:.6g} -> {new['next_step']['vrmse']['mean']:.6g}, "
                  f"1:20 {old['rollout_mean']['vrmse']['mean']:.6g} -> {new['rollout_mean']['vrmse']['mean']:.6g}, "
                  f"{'identical' if same else 'DIFFERENT'}, data_sha256 {new['data_sha256']}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
