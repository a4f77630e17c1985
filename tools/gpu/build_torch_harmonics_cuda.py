#!/usr/bin/env python3
"""Build torch-harmonics' CUDA kernels (DISCO and S2 attention) from the CUDA sources inside its PyPI wheel.

PyPI has no source distribution of torch-harmonics 0.9.x and its wheels carry compiled kernels for the CPU
only, but they ship the C++/CUDA sources next to the Python code::

    torch_harmonics/disco/optimized/{disco_interface.cpp, disco_helpers.cpp, kernels_cpu/*.cpp, kernels_cuda/*.cu}
    torch_harmonics/attention/optimized/{attention_interface.cpp, attention_helpers.cpp, kernels_cpu/*.cpp,
                                         kernels_cuda/*.cu}

This script compiles, with nvcc and the installed (CUDA) torch, the four extension modules the package
loads, as torch-harmonics' own ``setup.py`` does with ``BUILD_CPP=1 BUILD_CUDA=1``:

* ``disco_helpers`` and ``attention_helpers`` (top-level modules; ``-DBUILD_CPP=1 -DBUILD_CUDA=1``, so
  ``cuda_kernels_is_available()`` is True; the Hopper/Blackwell k-packed DISCO forward stays off);
* ``torch_harmonics.disco._C`` and ``torch_harmonics.attention._C``: the op interface, the CPU kernels and
  every ``kernels_cuda/*.cu`` (``torch.utils.cpp_extension.CUDAExtension``, ninja when present).

Use::

    python tools/gpu/build_torch_harmonics_cuda.py --out build/th_cuda              # build only (timed)
    python tools/gpu/build_torch_harmonics_cuda.py --out build/th_cuda --install    # and replace the CPU-only .so
    python tools/gpu/build_torch_harmonics_cuda.py --out build/th_cuda --arch 9.0 --jobs 16

``--arch`` is ``TORCH_CUDA_ARCH_LIST`` (default ``9.0``: H100 and H200; ``8.0`` A100, ``10.0`` B200;
several separated by ``;``). ``--install`` copies the four ``.so`` files over the installed ones (in the
folder that holds ``torch_harmonics``; the CPU-only files are kept as ``*.so.cpu-only``). The record,
``OUT/build.json``, has the seconds of the build, the versions (torch, its CUDA, nvcc, torch-harmonics),
the architecture, the files and whether a new process sees ``cuda_kernels_is_available()``. Needs no GPU to
build (nvcc and a CUDA build of torch); the check of the kernels against the CPU ones needs one
(``tools/gpu/gpu_check.py`` runs it). Exit status 0 on success, 1 when a step fails (its output is in
``OUT/build.log``), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

#: The extension modules: (module name, package folder relative to torch_harmonics, kind).
EXTENSIONS = [
    ("disco_helpers", "disco", "helpers"),
    ("attention_helpers", "attention", "helpers"),
    ("torch_harmonics.disco._C", "disco", "kernels"),
    ("torch_harmonics.attention._C", "attention", "kernels"),
]

SETUP = """
import json, sys
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension
spec = json.load(open(sys.argv.pop(1)))
mods = []
for e in spec:
    cls = CUDAExtension if e["cuda"] else CppExtension
    mods.append(cls(e["name"], e["sources"], include_dirs=e["include_dirs"], extra_compile_args=e["args"]))
setup(
    name="torch_harmonics_cuda_kernels",
    ext_modules=mods,
    cmdclass={"build_ext": BuildExtension},
    script_args=sys.argv[1:],
)
"""


def package_dir() -> Path:
    """The installed ``torch_harmonics`` folder, found without importing it (its CPU-only ``_C`` stays unloaded).

    Raises
    ------
    SystemExit
        If torch-harmonics is not installed.
    """
    spec = importlib.util.find_spec("torch_harmonics")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch_harmonics is not installed: pip install torch-harmonics first")
    return Path(list(spec.submodule_search_locations)[0])


def extension_specs(th: Path) -> list[dict]:
    """Sources, include folders and flags of the four extensions from the layout of the installed wheel.

    Raises
    ------
    SystemExit
        If a folder or file of the expected layout is missing (another torch-harmonics version).
    """
    release = {"cxx": ["-O3", "-DNDEBUG"], "nvcc": ["-O3", "-DNDEBUG"]}
    out = []
    for name, sub, kind in EXTENSIONS:
        opt = th / sub / "optimized"
        cpu, cuda = opt / "kernels_cpu", opt / "kernels_cuda"
        need = [opt / f"{sub}_helpers.cpp"] if kind == "helpers" else [opt / f"{sub}_interface.cpp", cpu, cuda]
        missing = [str(p) for p in need if not p.exists()]
        if missing:
            raise SystemExit(
                f"torch-harmonics at {th} lacks {missing}: this script knows the 0.9.x wheel layout "
                f"(torch_harmonics/*/optimized/kernels_cuda/*.cu)"
            )
        if kind == "helpers":
            flags = ["-DBUILD_CPP=1", "-DBUILD_CUDA=1"]
            out.append(
                {
                    "name": name,
                    "sources": [str(opt / f"{sub}_helpers.cpp")],
                    "include_dirs": [str(opt)],
                    "args": {"cxx": flags},
                    "cuda": False,
                }
            )
        else:
            sources = [opt / f"{sub}_interface.cpp", *sorted(cpu.glob("*.cpp")), *sorted(cuda.glob("*.cu"))]
            out.append(
                {
                    "name": name,
                    "sources": [str(p) for p in sources],
                    # then the headers of pip's CUDA wheels (nvidia/*/include: cusparse.h, which ATen's CUDA headers
                    # include, is missing from a toolkit without cuSPARSE's development files)
                    "include_dirs": [
                        str(opt),
                        str(cpu),
                        str(cuda),
                        *sorted(map(str, th.parent.glob("nvidia/*/include"))),
                    ],
                    "args": release,
                    "cuda": True,
                }
            )
    return out


def _versions() -> dict:
    import torch

    nvcc = shutil.which("nvcc")
    nvcc_v = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip() if nvcc else None
    dist = importlib.metadata.version("torch-harmonics") if importlib.util.find_spec("torch_harmonics") else None
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_harmonics": dist,
        "nvcc": nvcc_v.splitlines()[-1] if nvcc_v else None,
        "cuda_available": torch.cuda.is_available(),
    }


def _built_files(build_lib: Path) -> dict[str, Path]:
    files = {}
    for name, _, _ in EXTENSIONS:
        parts = name.split(".")
        hits = sorted((build_lib.joinpath(*parts[:-1])).glob(parts[-1] + "*.so"))
        if hits:
            files[name] = hits[0]
    return files


def install(files: dict[str, Path], th: Path, log) -> list[str]:
    """Copy the built modules over the installed ones (the old kept as ``*.so.cpu-only``); returns the targets."""
    site = th.parent
    done = []
    for name, src in files.items():
        parts = name.split(".")
        folder = site.joinpath(*parts[:-1])
        old = sorted(folder.glob(parts[-1] + ".*so"))
        target = old[0] if old else folder / src.name
        if target.exists() and not Path(str(target) + ".cpu-only").exists():
            shutil.copy2(target, str(target) + ".cpu-only")
        tmp = target.with_name(target.name + ".tmp")
        shutil.copy2(src, tmp)
        os.replace(tmp, target)
        print(f"installed {target}", file=log, flush=True)
        done.append(str(target))
    return done


def check_loaded(extra_path: Path | None) -> dict:
    """In a new process: ``cuda_kernels_is_available()`` of both helpers (from ``extra_path`` first when given)."""
    code = (
        "import json, disco_helpers, attention_helpers; print(json.dumps({'disco': "
        "disco_helpers.cuda_kernels_is_available(), 'attention': attention_helpers.cuda_kernels_is_available()}))"
    )
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(extra_path), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if p.returncode:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="build folder (build.json, build.log, the .so files)")
    ap.add_argument("--arch", default=os.environ.get("TORCH_CUDA_ARCH_LIST", "9.0"), help="TORCH_CUDA_ARCH_LIST")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel compile jobs (MAX_JOBS)")
    ap.add_argument("--install", action="store_true", help="replace the installed CPU-only modules")
    ap.add_argument("--timeout-s", type=float, default=3600.0, help="limit of the compilation")
    ap.add_argument("--dry-run", action="store_true", help="find the sources and write the plan; compile nothing")
    args = ap.parse_args(argv)
    if args.dry_run:
        out = Path(args.out).resolve()
        out.mkdir(parents=True, exist_ok=True)
        specs = extension_specs(package_dir())
        (out / "extensions.json").write_text(json.dumps(specs, indent=1))
        n = sum(len(e["sources"]) for e in specs)
        (out / "build.json").write_text(json.dumps({"dry_run": True, "ok": True, "sources": n}, indent=1))
        print(f"torch-harmonics CUDA kernels: {len(specs)} extensions, {n} sources found (dry run) -> {out}")
        return 0
    if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
        print(
            "build_torch_harmonics_cuda: error: nvcc not found: install the CUDA toolkit or set CUDA_HOME",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    th = package_dir()
    specs = extension_specs(th)
    record = {"versions": _versions(), "arch": args.arch, "jobs": args.jobs, "package": str(th), "ok": False}
    (out / "extensions.json").write_text(json.dumps(specs, indent=1))
    (out / "setup_kernels.py").write_text(SETUP)
    env = dict(os.environ, TORCH_CUDA_ARCH_LIST=args.arch, MAX_JOBS=str(args.jobs))
    if "CUDA_HOME" not in env:  # torch guesses it from nvcc's folder: wrong where nvcc is a wrapper (/usr/local/bin)
        nvcc = Path(shutil.which("nvcc") or "nvcc").resolve()
        for home in (nvcc.parent.parent, Path("/usr/local/cuda")):
            if (home / "include" / "cuda_runtime.h").exists():
                env["CUDA_HOME"] = str(home)
                break
    record["cuda_home"] = env.get("CUDA_HOME")
    cmd = [sys.executable, str(out / "setup_kernels.py"), str(out / "extensions.json"), "build_ext"]
    cmd += ["--build-lib", str(out / "lib"), "--build-temp", str(out / "tmp")]
    t0 = time.perf_counter()
    with open(out / "build.log", "w") as log:
        print(f"$ {' '.join(cmd)}  (TORCH_CUDA_ARCH_LIST={args.arch} MAX_JOBS={args.jobs})", file=log, flush=True)
        try:
            p = subprocess.run(cmd, cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=args.timeout_s)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = 124
        record["build_s"] = round(time.perf_counter() - t0, 1)
        record["returncode"] = rc
        files = _built_files(out / "lib")
        record["files"] = {k: str(v) for k, v in files.items()}
        record["ok"] = rc == 0 and len(files) == len(EXTENSIONS)
        if record["ok"]:
            record["helpers_see_cuda_kernels"] = check_loaded(out / "lib")
            if args.install:
                record["installed"] = install(files, th, log)
                record["helpers_see_cuda_kernels_installed"] = check_loaded(None)
    (out / "build.json").write_text(json.dumps(record, indent=1))
    state = "built" if record["ok"] else f"FAILED (exit {record['returncode']}; see {out / 'build.log'})"
    print(f"torch-harmonics CUDA kernels {state} in {record['build_s']:.0f} s for arch {args.arch} -> {out}")
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
