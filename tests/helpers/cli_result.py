"""What a failing ``dandelion-*`` job leaves on stderr (tests/conftest.py puts tests/helpers on sys.path)."""

from __future__ import annotations

import pytest


def one_line_error(main, argv, capsys, status: int = 2) -> str:
    """Run ``main(argv)``; assert it exits with ``status`` and exactly one stderr line without a traceback; return
    that line."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err.strip()
    assert info.value.code == status, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err
