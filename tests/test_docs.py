"""The documentation site builds without a warning, and the README stays a front door whose
links lead somewhere: CI runs only pytest, so this is where a broken link or a page left out of
mkdocs.yml's nav fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    # Material's banner about MkDocs 2.0 is not a build warning: kept out of the output.
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
         "--site-dir", str(site)], cwd=config.parent, capture_output=True, text=True,
        timeout=240, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strictly(tmp_path):
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "suites" / "proactiveagent" / "index.html").is_file()


@pytest.mark.parametrize("home, other, named", [
    ("# Home\n", "# Forgotten\n", "forgotten.md"),        # a page left out of nav
    ("# Home\n[a link](missing.md)\n", None, "missing.md"),  # a link to no page
    ("# Home\n[a link](#nowhere)\n", None, "nowhere"),      # a link to no anchor
])
def test_the_site_refuses_what_a_reader_would_stumble_on(tmp_path, home, other, named):
    # The project's own mkdocs.yml with a nav of one page, over a docs folder of one or two.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(home, encoding="utf-8")
    if other:
        (docs / "forgotten.md").write_text(other, encoding="utf-8")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = re.search(r"^nav:\n(?:  .*\n)+", config, re.MULTILINE)
    assert nav is not None
    (tmp_path / "mkdocs.yml").write_text(
        config.replace(nav.group(0), "nav:\n  - Home: index.md\n"), encoding="utf-8")
    done = build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    assert named in done.stdout + done.stderr


def _anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, spelled as GitHub and MkDocs both spell them."""
    headings, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):  # a fence opens or closes only at a line's start
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#+ (.+)$", line)):
            headings.append(heading.group(1))
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_the_readme_is_a_short_front_door():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md"])
def test_the_links_outside_the_site_resolve(page):
    # The site's own links are checked by the strict build; these two pages are outside it.
    links = re.findall(r"\]\(([^)\s]+)\)", (ROOT / page).read_text(encoding="utf-8"))
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert len(local) >= 2, "it links into the docs"
    broken = []
    for link in local:
        path, _, anchor = link.partition("#")
        if not (ROOT / path).exists() or (anchor and anchor not in _anchors(ROOT / path)):
            broken.append(link)
    assert broken == []
