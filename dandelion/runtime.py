"""What every job shares with the machine it runs on: device, process group, atomic files, provenance.

* :func:`resolve_device` turns ``device=auto|cpu|cuda|cuda:N`` into a :class:`torch.device`
  (under torchrun a bare ``cuda`` becomes this process's ``cuda:LOCAL_RANK``);
* :class:`ProcessGroup` reads torchrun's ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` and, for more than one
  process, initialises ``torch.distributed`` (nccl on CUDA, gloo otherwise) with sum, broadcast and
  barrier helpers that are no-ops for a single process;
* :func:`write_text_atomic`, :func:`write_json_atomic`, :func:`write_yaml_atomic`: the file is written
  under a hidden temporary name in its final folder (:func:`temp_path`) and renamed with
  ``os.replace``, so a file with its final name is always complete;
* :class:`DamagedFileError`: an input file that is truncated, corrupt or not what it should be (the message
  names the file and the fix); :func:`check_writable`: an output's folder can be written, before any work;
* :func:`versions` and :func:`machine`: the provenance records stored in dataset folders,
  checkpoints and benchmark cells.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.metadata as md
import json
import os
import platform
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
import torch.distributed as dist
import yaml

from . import __version__

__all__ = [
    "plain",
    "resolve_device",
    "device_name",
    "check_device",
    "ProcessGroup",
    "temp_path",
    "temp_leftovers",
    "check_writable",
    "is_zarr_store",
    "DamagedFileError",
    "write_text_atomic",
    "write_json_atomic",
    "write_yaml_atomic",
    "versions",
    "machine",
]


# ---------------------------------------------------------------------------------------------- device
def plain(obj):
    """A configuration as plain Python containers: mappings to ``dict``, sequences to ``list``, resolved.

    Accepts dicts, lists and OmegaConf containers (converted with ``OmegaConf.to_container(resolve=True,
    throw_on_missing=False)``, so a mandatory ``???`` value stays the string ``"???"``). OmegaConf is never
    imported here: an OmegaConf object can only exist once its module is loaded.
    """
    if type(obj).__module__.startswith("omegaconf"):
        obj = sys.modules["omegaconf"].OmegaConf.to_container(obj, resolve=True, throw_on_missing=False)
    if isinstance(obj, Mapping):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        return [plain(v) for v in obj]
    return obj


def check_device(name, key: str = "device") -> str:
    """``name`` when it is ``cpu``, ``auto``, ``cuda`` or ``cuda:N`` that this machine has.

    Raises
    ------
    ValueError
        For another name, CUDA asked for without CUDA, or a device index this machine lacks (the message
        names ``key`` and the values to use).
    """
    name = str(name or "auto")
    if name in ("cpu", "auto"):
        return name
    m = re.fullmatch(r"cuda(?::(\d+))?", name)
    if not m:
        raise ValueError(f"{key}={name} is not a device: use {key}=cpu, cuda, cuda:N or auto")
    if not torch.cuda.is_available():
        raise ValueError(f"{key}={name} but CUDA is not available on this machine: use {key}=cpu (or {key}=auto)")
    if m.group(1) is not None and int(m.group(1)) >= torch.cuda.device_count():
        raise ValueError(
            f"{key}={name} but this machine has {torch.cuda.device_count()} CUDA device(s): "
            f"use {key}=cuda:0 .. cuda:{torch.cuda.device_count() - 1}"
        )
    return name


def resolve_device(name, local_rank: int = 0) -> torch.device:
    """The torch device of ``name`` (``"auto"`` or None: CUDA if available, else CPU).

    A bare ``"cuda"`` becomes ``cuda:<local_rank>`` (one GPU per torchrun process).

    Raises
    ------
    ValueError
        If CUDA is asked for but is not available (the message says to use ``device=cpu``).
    """
    dev = torch.device(device_name(check_device(name)))
    if dev.type == "cuda":
        if dev.index is None:
            dev = torch.device("cuda", local_rank)
    return dev


def device_name(name) -> str:
    """``name`` as a string with ``"auto"`` (or None) replaced by ``"cuda"`` or ``"cpu"`` (nothing else checked)."""
    name = str(name or "auto")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


class ProcessGroup:
    """Process-group facts of this process; initialises ``torch.distributed`` under torchrun (``WORLD_SIZE > 1``).

    Parameters
    ----------
    device : the device name the job asked for (:func:`resolve_device`), or None for a job without a
        device of its own (then the group is gloo and no CUDA device is selected).
    timeout : of the collectives.

    Attributes
    ----------
    world_size, rank, local_rank : from torchrun's environment (1, 0, 0 without it).
    device : :class:`torch.device` or None. main : rank 0.
    """

    def __init__(self, device=None, timeout: datetime.timedelta = datetime.timedelta(minutes=30)):
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.device = None if device is None else resolve_device(device, self.local_rank)
        cuda = self.device is not None and self.device.type == "cuda"
        self.owns_group = False
        if cuda:
            torch.cuda.set_device(self.device)
        if self.world_size > 1 and not dist.is_initialized():
            dist.init_process_group(backend="nccl" if cuda else "gloo", timeout=timeout)
            self.owns_group = True

    @property
    def main(self) -> bool:
        return self.rank == 0

    def all_sum(self, values: list[float]) -> list[float]:
        """Sum of ``values`` over the ranks (float64)."""
        if self.world_size == 1:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def broadcast(self, obj):
        """Rank 0's ``obj`` on every rank."""
        if self.world_size == 1:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather(self, obj) -> list:
        """Every rank's ``obj``, in rank order."""
        if self.world_size == 1:
            return [obj]
        out = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self):
        if self.world_size > 1:
            dist.barrier()

    def close(self):
        """Destroy the process group if this object created it."""
        if self.owns_group:
            dist.destroy_process_group()
            self.owns_group = False


# ---------------------------------------------------------------------------------------------- atomic files
def temp_path(path, kind: str = "tmp") -> Path:
    """The hidden temporary name ``.<name>.<pid>.<kind>`` (same folder) a file or store is written under before
    ``os.replace``: the process id keeps two writers of one name apart."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{kind}")


def temp_leftovers(path) -> list[Path]:
    """The temporary files of ``path`` (:func:`temp_path`, any process id) that lie in its folder: what an
    interrupted writer left. Only a holder of the folder's :class:`OutputLock` may delete them."""
    path = Path(path)
    return sorted(path.parent.glob(f".{glob_escape(path.name)}.*.tmp")) if path.parent.is_dir() else []


def glob_escape(name: str) -> str:
    """``name`` with the glob metacharacters ``*?[`` bracketed (:mod:`glob.escape` for one path component)."""
    return re.sub(r"([*?[])", r"[\1]", name)


def check_writable(path, key: str = "output") -> Path:
    """Check that ``path`` (a file or folder to create) can be written: its nearest existing folder accepts a
    new file (a probe file is created and removed). Returns ``path``.

    Raises
    ------
    PermissionError
        Naming ``key``, the folder that refuses and the fix, when that folder cannot be written.
    NotADirectoryError
        When the nearest existing ancestor is a file.
    """
    path = Path(path).expanduser()
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(f"{key}={path}: {folder} is a file, not a folder: choose another {key}")
    try:
        fd, probe = tempfile.mkstemp(prefix=".dandelion-write-probe.", dir=folder)
    except OSError as err:
        raise PermissionError(
            f"{key}={path} cannot be written: {folder} refuses new files ({err.strerror or err}); "
            f"choose a writable {key}"
        ) from err
    os.close(fd)
    os.unlink(probe)
    return path


def is_zarr_store(path) -> bool:
    """True when ``path`` is a folder holding Zarr (format 2 or 3) root metadata."""
    p = Path(path)
    return p.is_dir() and any((p / name).is_file() for name in (".zgroup", ".zarray", ".zmetadata", "zarr.json"))


def write_text_atomic(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (its folder is created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _json_default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    return str(o)


def write_json_atomic(path, obj, indent: int = 1) -> Path:
    """Write ``obj`` as JSON (``indent``, a final newline; arrays as lists, other objects as strings) atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=indent, default=_json_default) + "\n")


def write_yaml_atomic(path, data) -> Path:
    """Write ``data`` as YAML atomically (keys in insertion order)."""
    return write_text_atomic(path, yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120))


# ---------------------------------------------------------------------------------------------- damaged inputs
class DamagedFileError(OSError):
    """An input file is truncated, corrupt or not what it should be; the message names the file and the fix."""


# ---------------------------------------------------------------------------------------------- provenance
_PACKAGES = (
    ("torch", "torch"),
    ("torch_harmonics", "torch-harmonics"),
    ("numpy", "numpy"),
    ("h5py", "h5py"),
    ("hydra", "hydra-core"),
    ("omegaconf", "omegaconf"),
)
_CONFIG_PACKAGES = ("hydra", "omegaconf")


def versions() -> dict:
    """Versions of Python, this package and its main dependencies (strings; None for one not installed),
    and the CUDA version torch was built with (None for a CPU build)."""
    out = {"python": platform.python_version(), "dandelion": str(__version__)}
    for key, dist_name in _PACKAGES:
        try:  # the module's own version string keeps local build tags (e.g. "+cu130") that the metadata drops
            # hydra and omegaconf are never imported here (a run from the Python API does without them): their version
            # is the loaded module's, else the installed distribution's
            module = sys.modules.get(key) if key in _CONFIG_PACKAGES else importlib.import_module(key)
            out[key] = str(module.__version__)
        except (ImportError, AttributeError):
            try:
                out[key] = md.version(dist_name)
            except md.PackageNotFoundError:
                out[key] = None
    out["cuda"] = torch.version.cuda
    return out


def machine(device="cpu") -> dict:
    """The machine: CPU model, logical cores, platform, load average, torch threads, GPU (when ``device`` is CUDA)."""
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform()}
    try:
        info["load_average"] = [round(v, 2) for v in os.getloadavg()]
    except OSError:  # pragma: no cover
        info["load_average"] = None
    info["torch_threads"] = torch.get_num_threads()
    if str(device).startswith("cuda") and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(torch.device(device))
        info["gpu"] = p.name
        info["gpu_memory_bytes"] = int(p.total_memory)
        info["gpu_count"] = torch.cuda.device_count()
    else:
        info["gpu"] = None
    return info
