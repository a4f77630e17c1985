"""What the README's example commands write into a checkout is git-ignored (nothing to commit by accident)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# KEY=VALUE arguments of the README's commands that name a file or folder they write
_WRITES = re.compile(r"(?<![\w.])(output|output_dir|run_dir|dataset\.path|dst|quickstart\.output_dir)=([\w./-]+)")


def _written_paths() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = "\n".join(re.findall(r"```bash\n(.*?)```", text, flags=re.S))
    # placeholders in capitals (DIR, PATH, OUTDIR) are the reader's own choice
    return sorted({v for _, v in _WRITES.findall(blocks) if not v.isupper() and not v.startswith("/")})


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and a git checkout")
def test_readme_example_outputs_are_ignored():
    paths = _written_paths()
    assert {"forecasts.nc", "forecasts.zarr", "report"} <= set(paths)  # the parse found the export and report examples
    res = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", *paths], capture_output=True, text=True)
    ignored = set(res.stdout.split())
    assert not set(paths) - ignored, f"README examples write {sorted(set(paths) - ignored)}, not in .gitignore"
