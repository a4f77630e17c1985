"""MkDocs hooks of the documentation site (``mkdocs.yml``: ``hooks:``); not a page (``exclude_docs``).

* The API reference: ``dandelion.datasets``, ``.solvers``, ``.benchmarks`` and ``.configs`` live in the repository's
  top-level folders (``[tool.setuptools.package-dir]``), which mkdocstrings' static loader cannot follow, so
  loading this file builds ``build/api_src/dandelion/``: links to every entry of ``dandelion/`` plus those folders.
* Links that leave ``docs/`` (``../benchmarks/README.md`` from ``docs/decisions.md``, written for reading the
  sources on a forge) are rewritten to a copy of the file under ``_repo/`` in the site (``on_files`` adds the copy;
  Markdown files are copied as they are, not rendered); a link to a folder becomes its path in code, and one to a
  folder of docs/ a link to its index page.
* ``<!-- leaderboard-verdict -->`` and ``<!-- leaderboard-headline -->`` in a page are replaced by the verdict
  paragraph and the headline table of ``benchmarks/results/cpu/leaderboard.md`` (both generated from the cells), so
  the site states the benchmark's current answer in the leaderboard's own words and never a stale copy.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

_LINK = re.compile(r"(!?\[[^\]]*\])\(([^)\s]+)\)")
_MOVED_FOLDERS = {"datasets": "datasets", "solvers": "solvers", "benchmarks": "benchmarks", "configs": "configs"}
_LEADERBOARD = "benchmarks/results/cpu/leaderboard.md"
_ROOT: Path | None = None
_DOCS: Path | None = None


def _build_api_tree(root: Path) -> None:
    """Make ``build/api_src/dandelion/``: a link to every entry of ``dandelion/`` and to the top-level folders."""
    tree = root / "build" / "api_src" / "dandelion"
    tree.mkdir(parents=True, exist_ok=True)
    wanted = {p.name: p for p in (root / "dandelion").iterdir() if p.name != "__pycache__"}
    wanted.update({name: root / folder for name, folder in _MOVED_FOLDERS.items()})
    # tolerant of another build doing the same at the same time (two test runs, `mkdocs serve` beside a build):
    # stale links are removed if still there, new ones are made under a private name and renamed into place
    for entry in tree.iterdir():
        if entry.name.startswith("."):  # another build's link on its way into place
            continue
        if entry.name not in wanted or not entry.is_symlink() or entry.resolve() != wanted[entry.name].resolve():
            entry.unlink(missing_ok=True)
    for name, target in wanted.items():
        link = tree / name
        if not (link.is_symlink() and link.resolve() == target.resolve()):
            tmp = tree / f".{name}.{os.getpid()}.tmp"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(target)
            os.replace(tmp, link)


# Built when mkdocs loads this file, before any plugin's ``on_config``: mkdocstrings takes its search paths in its own
# ``on_config`` and leaves out a folder that does not exist yet, so a tree made in this file's ``on_config`` came too
# late on a fresh clone (the first build failed, the second passed).
_build_api_tree(Path(__file__).resolve().parents[1])


def on_config(config):
    global _ROOT, _DOCS
    _ROOT = Path(config.config_file_path).resolve().parent
    _DOCS = Path(config.docs_dir).resolve()
    _build_api_tree(_ROOT)
    return config


def _outside_target(page_src: str, url: str) -> str | None:
    """The repository path a relative link of ``page_src`` (a path under docs/) points to, if it leaves docs/."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", url) or url.startswith(("#", "/")):
        return None
    path = url.split("#", 1)[0]
    rel = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page_src), path))
    if rel.startswith("docs/") or rel == "docs" or rel.startswith(".."):
        return None
    return rel


def _markdown_sources():
    for path in sorted(_DOCS.rglob("*.md")):
        yield path.relative_to(_DOCS).as_posix(), path.read_text()


def on_files(files, config):
    have = {f.src_uri for f in files}
    for src, text in _markdown_sources():
        for _, url in _LINK.findall(text):
            rel = _outside_target(src, url)
            if rel and (_ROOT / rel).is_file() and f"_repo/{rel}" not in have:
                copy = File(rel, src_dir=str(_ROOT), dest_dir=config.site_dir, use_directory_urls=False)
                copy.src_uri, copy.dest_uri = f"_repo/{rel}", f"_repo/{rel}"
                copy.abs_src_path = str(_ROOT / rel)
                copy.is_documentation_page = lambda: False
                copy.is_static_page = lambda: True
                files.append(copy)
                have.add(copy.src_uri)
    return files


def _rewrite(page_src: str, match: re.Match) -> str:
    label, url = match.groups()
    rel = _outside_target(page_src, url)
    if rel is None:
        return _folder_index(page_src, match)
    if (_ROOT / rel).is_dir():
        return f"{label.lstrip('!')[1:-1]} (`{rel}/`)"
    if not (_ROOT / rel).is_file():
        return match.group(0)  # a broken link: left for mkdocs --strict to report
    anchor = "#" + url.split("#", 1)[1] if "#" in url else ""
    up = os.path.relpath("_repo/" + rel, posixpath.dirname(page_src) or ".")
    return f"{label}({up.replace(os.sep, '/')}{anchor})"


def _folder_index(page_src: str, match: re.Match) -> str:
    """A link to a folder of docs/ (``datasets/``) as a link to its index page (``datasets/README.md``)."""
    label, url = match.groups()
    if re.match(r"^[a-z][a-z0-9+.-]*:", url) or url.startswith(("#", "/")) or not url.split("#")[0].endswith("/"):
        return match.group(0)
    folder = _DOCS / posixpath.dirname(page_src) / url.split("#")[0]
    for index in ("index.md", "README.md"):
        if (folder / index).is_file():
            return f"{label}({url.split('#')[0]}{index})"
    return match.group(0)


def _section(heading: str) -> str:
    """The body of the leaderboard's section ``## <heading>...`` (up to the next ``## ``), its links relinked."""
    text = (_ROOT / _LEADERBOARD).read_text()
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end > 0 else None].split("\n", 1)[1]
    return _LINK.sub(lambda m: _rewrite("benchmark.md", _relink(m)), section)


def _relink(match: re.Match) -> re.Match:
    """A link of the leaderboard (relative to its folder) as one of docs/benchmark.md."""
    label, url = match.groups()
    if re.match(r"^[a-z][a-z0-9+.-]*:", url) or url.startswith("#"):
        return match
    target = posixpath.normpath(posixpath.join(posixpath.dirname(_LEADERBOARD), url))
    return _LINK.match(f"{label}({posixpath.relpath(target, 'docs')})")


def on_page_markdown(markdown, page, config, files):
    src = page.file.src_uri
    for marker, heading in (("<!-- leaderboard-verdict -->", "Verdict"), ("<!-- leaderboard-headline -->", "Headline")):
        if marker in markdown:
            markdown = markdown.replace(marker, _section(heading))
    return _LINK.sub(lambda m: _rewrite(src, m), markdown)
