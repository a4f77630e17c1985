#!/usr/bin/env bash
# Prepare the wheel folder that benchmarks/gpu_check.sh installs from on an OFFLINE GPU machine
# (Python 3.12, x86_64 manylinux, torch preinstalled there: torch itself is NOT downloaded).
#
#   bash benchmarks/prepare_gpu_wheels.sh [DIR]        # default DIR = shared/wheels (never commit wheels)
#
# Needs network and pip here. Binary wheels are fetched for cp312 / manylinux x86_64 without
# dependency resolution (the list below is the package's dependency closure minus torch and its own
# dependencies); pure-Python packages that ship only a source archive (antlr4-python3-runtime 4.9.3,
# needed by omegaconf 2.3 / hydra-core 1.3) are turned into wheels with `pip wheel`.
# torch-harmonics 0.9.2: its binary wheels carry C++/CUDA extensions built against one torch
# version; if no cp312 wheel matches the GPU machine's torch, the source archive is built here with
# `pip wheel --no-build-isolation` WITHOUT extensions (the package falls back to its pure-torch kernels, which is
# what gpu_check.sh measures for DISCO anyway: optimized_kernel=false).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$ROOT/shared/wheels}"
PY="${PYTHON:-python3}"
mkdir -p "$DIR"
PLAT=(--only-binary=:all: --no-deps --python-version 3.12 --implementation cp --abi cp312
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
BINARY=(
  "numpy>=1.24,<2.4" "scipy>=1.10" "h5py>=3.8" "netCDF4>=1.6" "cftime" "pandas>=1.5" "pyyaml>=6"
  "matplotlib>=3.6" "contourpy" "kiwisolver" "pillow" "fonttools"
)
PURE=(
  "hydra-core==1.3.2" "omegaconf==2.3.0" "xarray>=2023.1" "tqdm>=4.60" "packaging" "cycler" "pyparsing"
  "python-dateutil" "six" "pytz" "tzdata" "certifi" "pytest>=7.4" "iniconfig" "pluggy" "setuptools>=70" "wheel"
)
echo "downloading binary wheels (cp312 manylinux x86_64) into $DIR"
"$PY" -m pip download "${PLAT[@]}" -d "$DIR" "${BINARY[@]}"
echo "downloading pure-Python wheels"
"$PY" -m pip download --no-deps --only-binary=:all: -d "$DIR" "${PURE[@]}"
echo "building antlr4-python3-runtime 4.9.3 (source only on PyPI) into a wheel"
"$PY" -m pip wheel --no-deps -w "$DIR" "antlr4-python3-runtime==4.9.3"
echo "torch-harmonics 0.9.2"
if ! "$PY" -m pip download "${PLAT[@]}" -d "$DIR" "torch-harmonics==0.9.2"; then
  tmp="$(mktemp -d)"
  "$PY" -m pip download --no-deps --no-binary=:all: -d "$tmp" "torch-harmonics==0.9.2"
  # pure-Python build (no extensions): the build needs torch importable here
  FORCE_CUDA_EXTENSION=0 BUILD_CPP=0 "$PY" -m pip wheel --no-deps --no-build-isolation -w "$DIR" "$tmp"/torch_harmonics-0.9.2*
  rm -rf "$tmp"
fi
ls -1 "$DIR" | sed 's/^/  /'
echo "done: copy $DIR to the GPU machine and run  DANDELION_WHEELS=$DIR bash benchmarks/gpu_check.sh OUTDIR"
