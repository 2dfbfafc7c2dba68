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


_NAMES_IN_LOWER_CASE = ("proactflow", "litellm", "inspect_ai", "pip", "mkdocs", "polars",
                        "pyarrow", "prefect", "gc", "e.g.")
"""Names that start a sentence in lower case as they are spelled."""


def _prose(text: str) -> list[tuple[str, str, str]]:
    """Each prose paragraph of a Markdown page with the kinds of block around it (`fence`,
    `heading`, `other` for tables, lists, quotes and HTML, `prose`, or `none`)."""
    blocks: list[tuple[str, list[str]]] = []
    fenced = False
    kind, lines = "none", []
    for line in text.splitlines() + [""]:
        stripped = line.strip()
        fence = re.match(r"(`{3,}|~{3,})[^`]*$", stripped)
        heading = not fenced and re.match(r"#{1,6} ", line)
        if fence or heading or not stripped:
            if lines:
                blocks.append((kind, lines))
            kind, lines = "none", []
            if fence:
                fenced = not fenced
                blocks.append(("fence", []))
            elif heading:
                blocks.append(("heading", []))
            continue
        if fenced:
            continue
        if not lines:
            other = re.match(r"(\||[-*+] |\d+\. |>|<|!\[|\[[^\]]+\]:|    |\t|---|===)", line)
            kind = "other" if other else "prose"
        lines.append(stripped)
    blocks = [block for place, block in enumerate(blocks)
              if not (block[0] == "fence" and place and blocks[place - 1][0] == "fence")]
    found = []
    for place, (kind, lines) in enumerate(blocks):
        if kind == "prose":
            before = blocks[place - 1][0] if place else "none"
            after = blocks[place + 1][0] if place + 1 < len(blocks) else "none"
            found.append((" ".join(lines), before, after))
    return found


def _unfinished(paragraph: str, before: str, after: str) -> str:
    """Why a prose paragraph reads as unfinished ("" when it does not): it starts in lower
    case after a heading or another paragraph (not continuing a sentence around a code block
    or list), it stops without a full stop before a heading or another paragraph, or a
    bracket or code span opened in it never closes."""
    if before in ("heading", "prose", "none") and paragraph[0].islower() \
            and not paragraph.startswith(_NAMES_IN_LOWER_CASE):
        return "starts in lower case"
    if after in ("heading", "prose", "none") and not re.search(r"[.:!?]\W*$", paragraph):
        return "ends without a full stop"
    spans = re.sub(r"(`+)(.+?)\1", "", paragraph)
    # More closing than opening brackets is an interval such as [a, b): not counted.
    if "`" in spans or spans.count("(") > spans.count(")"):
        return "leaves a bracket or code span open"
    return ""


def test_no_page_has_an_unfinished_sentence():
    # A cheap check for fragments left by an edit (a paragraph cut in half, a sentence that
    # stops mid-way); it reads prose paragraphs only, not code, tables or lists.
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [f"{page.relative_to(ROOT)}: {why}: {paragraph[:70]!r}"
             for page in pages for paragraph, before, after in _prose(page.read_text("utf-8"))
             if (why := _unfinished(paragraph, before, after))]
    assert found == []


@pytest.mark.parametrize("text", [
    "## Versions\n\nserver cannot start, its tests skip.\n",
    "# Title\n\nPython 3.11 (the tested set; without it, 3.10 or\nHow it is refreshed.\n",
    "# Title\n\nA sentence that stops\n\n## Next\n",
])
def test_the_unfinished_sentence_check_finds_fragments(text):
    assert [why for p, b, a in _prose(text) if (why := _unfinished(p, b, a))]
