"""The documentation site builds with ``mkdocs build --strict``, every internal link of the built site resolves,
and the API reference lists ``dandelion.api``, ``build_model``, every registered model and every scenario."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings")

ROOT = Path(__file__).resolve().parents[2]


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if a.get(key):
                self.links.append(a[key])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert res.returncode == 0, res.stderr[-4000:]
    return out


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(errors="replace"))
    return parser


def test_every_internal_link_resolves(site):
    parsed = {page: _parse(page) for page in site.rglob("*.html")}
    broken = []
    for page, links in parsed.items():
        for link in links.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:", "javascript:")):
                continue
            base = site if parts.path.startswith("/") else page.parent  # 404.html links from the site's root
            target = (base / unquote(parts.path).lstrip("/")).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)} -> {link}")
            elif parts.fragment and target.suffix == ".html" and target in parsed:
                if parts.fragment not in parsed[target].ids:
                    broken.append(f"{page.relative_to(site)} -> {link} (no such anchor)")
    assert not broken, "\n".join(broken[:40])


def test_api_reference_lists_the_entry_points_models_and_scenarios(site):
    from dandelion.datasets.scenario import available_scenarios, get_scenario
    from dandelion.registry import available_models, build_model

    ids = set().union(*(_parse(p).ids for p in (site / "api").glob("*.html")))
    wanted = {"dandelion.api", "dandelion.api.train", "dandelion.registry.build_model"}
    for name in available_models():
        if name.startswith("_"):
            continue  # models registered by tests
        cls = type(build_model(name, "tiny", 16, 4, 32, 64))
        wanted.add(f"{cls.__module__}.{cls.__qualname__}")
    for name in available_scenarios():
        cls = get_scenario(name)
        wanted.add(f"{cls.__module__}.{cls.__qualname__}")
    assert not wanted - ids, f"docs/api/*.md lacks ::: entries for {sorted(wanted - ids)}"


def test_every_model_and_dataset_has_a_page(site):
    from dandelion.datasets.scenario import available_scenarios
    from dandelion.registry import available_models

    models = {n for n in available_models() if not n.startswith("_")}
    assert not {n for n in models if not (site / "models" / f"{n}.html").exists()}
    assert not {n for n in available_scenarios() if not (site / "datasets" / f"{n}.html").exists()}
