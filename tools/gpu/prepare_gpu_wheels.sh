#!/usr/bin/env bash
# The wheel folder that tools/gpu/gpu_check.py installs from on an OFFLINE GPU machine.
#
#   bash tools/gpu/prepare_gpu_wheels.sh [DIR]        # default DIR = shared/wheels (git-ignored; never commit wheels)
#
# Needs network and pip here; run it once, on any x86_64 or arm machine (wheels are fetched for the
# GPU machine: CPython 3.12, manylinux x86_64). Only what that machine lacks is fetched (its image
# has torch 2.11, numpy, scipy, h5py, xarray, pandas, matplotlib, tqdm, pyyaml, pytest):
#   * torch-harmonics 0.9.2, the binary wheel built for torch 2.11 (its compiled kernels are CPU only; the GPU
#     check compiles the CUDA ones from the sources inside it: tools/gpu/build_torch_harmonics_cuda.py);
#   * netCDF4 and cftime (binary wheels);
#   * hydra-core 1.3.2 and omegaconf 2.3.0 (pure Python), and antlr4-python3-runtime 4.9.3, which PyPI
#     has as a source archive only: turned into a wheel here with `pip wheel`;
#   * setuptools and wheel, to build this package there without build isolation.
# Every wheel is installed there with `pip install --no-index --no-deps --target`, so one version of each.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DIR="${1:-$ROOT/shared/wheels}"
PY="${PYTHON:-python3}"
mkdir -p "$DIR"
PLAT=(--only-binary=:all: --no-deps --python-version 3.12 --implementation cp --abi cp312
      --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64)
echo "binary wheels (cp312, manylinux x86_64) -> $DIR"
"$PY" -m pip download "${PLAT[@]}" -d "$DIR" "torch-harmonics==0.9.2" "netCDF4>=1.6,<1.8" "cftime>=1.6"
echo "pure-Python wheels"
"$PY" -m pip download --no-deps --only-binary=:all: -d "$DIR" "hydra-core==1.3.2" "omegaconf==2.3.0" "setuptools>=70,<81" "wheel"
echo "antlr4-python3-runtime 4.9.3 (source only on PyPI) -> wheel"
"$PY" -m pip wheel --no-deps -w "$DIR" "antlr4-python3-runtime==4.9.3"
ls -1 "$DIR" | sed 's/^/  /'
du -sh "$DIR"
echo "done: on the GPU machine run  python3 tools/gpu/gpu_check.py --out OUTDIR --wheels $DIR"
