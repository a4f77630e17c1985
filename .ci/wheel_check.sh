#!/usr/bin/env bash
# The wheel tells the truth: build it with `pip wheel . --no-deps`, install it into a fresh virtual environment and
# run `dandelion-quickstart --fast` from there, outside the checkout.
# The fresh environment reuses the dependencies already installed in $VENV (a .pth file puts $VENV's site-packages
# after its own), so no download and no second copy of torch; the package itself comes only from the wheel: the
# editable install of $VENV is not active there (site-packages added by a .pth do not run their own .pth files), and
# the check fails if `dandelion` is imported from anywhere but the fresh environment.
set -euo pipefail
VENV="$(cd "${VENV:-.venv}" && pwd)"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$VENV/bin/python" -m pip wheel "$ROOT" --no-deps -q -w "$WORK/dist"
WHEEL="$(ls "$WORK"/dist/dandelion_sphere-*.whl)"
unzip -l "$WHEEL" | grep -q "licenses/LICENSE" || { echo "wheel_check: $WHEEL carries no LICENSE"; exit 1; }
"$VENV/bin/python" -m venv "$WORK/venv"
NEW_SITE="$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# every site-packages folder of $VENV (its own, and those it layers on through .pth files of its own)
(cd "$WORK" && "$VENV/bin/python" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith("-packages")))') \
    > "$NEW_SITE/_dandelion_ci_deps.pth"
"$WORK/venv/bin/python" -m pip install -q --no-deps "$WHEEL"
cd "$WORK"
"$WORK/venv/bin/python" - "$NEW_SITE" <<'PY'
import importlib.metadata as md
import sys

import dandelion

assert dandelion.__file__.startswith(sys.argv[1]), f"dandelion imported from {dandelion.__file__}, not the wheel"
dist = md.distribution("dandelion-sphere")
missing = []
for req in dist.requires or []:
    if "extra ==" in req:
        continue
    name = req.split(";")[0].split("[")[0]
    for sep in "<>=!~ ":
        name = name.split(sep)[0]
    try:
        md.version(name)
    except md.PackageNotFoundError:
        missing.append(req)
assert not missing, f"the wheel needs {missing}, which the environment lacks"
print("wheel_check: dandelion", dandelion.__version__, "from", dandelion.__file__)
PY
OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" "$WORK/venv/bin/dandelion-quickstart" --fast quickstart.output_dir="$WORK/quickstart"
test -s "$WORK/quickstart/results.md"
echo "wheel_check: dandelion-quickstart --fast ran from the wheel"
