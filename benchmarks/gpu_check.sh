#!/usr/bin/env bash
# GPU check of Dandelion on an OFFLINE GPU machine (issue 8). Fits in 8 minutes (per-step timeouts).
#
#   bash benchmarks/gpu_check.sh OUTDIR
#
# Assumes Python 3.12 with torch (CUDA build) preinstalled. Installs the package and its missing
# dependencies from a local wheel folder (no network): $DANDELION_WHEELS, default shared/wheels
# (made by benchmarks/prepare_gpu_wheels.sh on a machine with network). Then:
#   1. the model tests on CUDA (tests/benchmarks/test_gpu_models.py: CUDA vs CPU, bf16) + tests/dandelion;
#   2. every model at 128x256 and 256x512, paper preset, forward and training step, fp32 and bf16 autocast,
#      DISCO with optimized_kernel=false (the pure-torch kernels; recorded in the JSON) -> OUTDIR/bench_models_gpu.json;
#      with the roofline context of the warp (bytes per layer vs the measured device bandwidth);
#   3. the solvers at 256x512 with batches 1 and 32 -> OUTDIR/bench_solvers_gpu.json.
# Logs go to OUTDIR/*.log; a summary of the step exit codes to OUTDIR/gpu_check_summary.json.
set -u
OUT="${1:?usage: gpu_check.sh OUTDIR}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
WHEELS="${DANDELION_WHEELS:-$ROOT/shared/wheels}"
declare -A RC
T0=$(date +%s)

step() {  # step NAME TIMEOUT_S CMD...
  local name="$1" limit="$2"; shift 2
  echo "== $name (limit ${limit}s) $(date -u +%H:%M:%S)"
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  RC[$name]=$?
  echo "   exit ${RC[$name]} after $(( $(date +%s) - T0 )) s total; tail:"; tail -n 5 "$OUT/$name.log" | sed 's/^/   /'
}

"$PY" -c "import torch, sys; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available()); print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')" | tee "$OUT/env.log"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$OUT/env.log" 2>&1 || true

# 0. install (no network): the package with its missing dependencies from the wheel folder
if [ -d "$WHEELS" ]; then
  step install 90 "$PY" -m pip install --no-index --find-links "$WHEELS" --no-build-isolation -e "$ROOT[dev]"
else
  echo "no wheel folder at $WHEELS (set DANDELION_WHEELS); trying the installed environment" | tee "$OUT/install.log"
  step install 120 "$PY" -m pip install --no-index --no-deps --no-build-isolation -e "$ROOT"
fi
"$PY" -m pip freeze > "$OUT/pip_freeze.txt" 2>&1 || true

# 1. model tests on CUDA
step tests 90 "$PY" -m pytest -q -x tests/benchmarks/test_gpu_models.py tests/dandelion -p no:cacheprovider

# 2. every model at 128x256 and 256x512 (paper preset), fp32 and bf16, B=4
step bench_models 190 "$PY" -m dandelion.benchmarks.bench target=models device=cuda fresh_process=false threads=null \
  'models.presets=[paper]' 'models.resolutions=[[128,256],[256,512]]' 'models.batch_sizes=[4]' 'models.dtypes=[fp32,bf16]' \
  models.disco_optimized_kernel=false models.n_repeat=5 models.n_warmup=2 models.bandwidth_mib=1024 \
  output="$OUT/bench_models_gpu.json"

# 3. the solvers at 256x512, batches 1 and 32 (card band limits; one frame each)
step bench_solvers 90 "$PY" -m dandelion.benchmarks.bench target=solvers device=cuda fresh_process=false threads=null \
  solvers.nlat=256 solvers.nlon=512 'solvers.batch_sizes=[1,32]' solvers.frames=1 \
  'solvers.lmax_by_scenario={galewsky: null, cahn_hilliard: null, chained_turbulence: null, held_suarez: null}' \
  'solvers.galewsky_reference.lmax=[255]' 'solvers.galewsky_reference.batches=[1,32]' solvers.galewsky_reference.days=0.05 \
  output="$OUT/bench_solvers_gpu.json"

{
  echo "{"
  first=1
  for k in "${!RC[@]}"; do [ $first = 1 ] || echo ","; first=0; printf '  "%s": %s' "$k" "${RC[$k]}"; done
  printf ',\n  "total_seconds": %s\n}\n' "$(( $(date +%s) - T0 ))"
} > "$OUT/gpu_check_summary.json"
cat "$OUT/gpu_check_summary.json"
