"""``dandelion-verify DIR``: check a dataset folder (checksums, schema, finite values).

The command around :func:`dandelion.datasets.verify.verify`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dandelion.cli.common import fail, guard
from dandelion.datasets.verify import PROG, verify


def main(argv: list[str] | None = None) -> int:
    """Console entry point: ``dandelion-verify DIR`` (prints problems; exit status 1 if any)."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Check a dandelion dataset folder against its checksums and schema."
    )
    parser.add_argument("path", help="dataset folder (the dataset.path of dandelion-generate)")
    parser.add_argument(
        "--no-data", action="store_true", help="skip decoding every frame (checksums and layout are still checked)"
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")
    args = parser.parse_args(argv)
    root = Path(args.path)
    if not root.exists():
        key, eq, value = args.path.partition("=")
        if eq and key in ("path", "dataset.path") and Path(value).exists():  # the Hydra spelling of the other jobs
            fail(
                PROG,
                f"{args.path!r} is not a folder: dandelion-verify takes the folder itself, as in "
                f"'dandelion-verify {value}' (no {key}=)",
            )
        fail(PROG, f"{root} does not exist: pass the dataset.path of a dandelion-generate run")
    if not root.is_dir() or not (root / "dataset.yaml").is_file():
        fail(
            PROG,
            f"{root} is not a Dandelion dataset folder (no dataset.yaml): pass the dataset.path of a "
            "dandelion-generate run",
        )
    with guard(PROG, args.debug):
        problems = verify(args.path, check_data=not args.no_data)
    for line in problems:
        print(line)
    if problems:
        print(f"dandelion-verify: {len(problems)} problem(s) in {args.path}", file=sys.stderr)
        return 1
    print(f"dandelion-verify: {args.path} is sound")
    return 0


if __name__ == "__main__":
    sys.exit(main())
