"""No document points outside the repository: a clone must be able to follow every link and path it gives.

A Markdown link or image is resolved from the document's folder and must stay inside the repository; any
other ``../`` (a path in prose, a code span or a command, all run from the repository root) leaves it.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# [text](target "title"), ![alt](target), and reference definitions [label]: target
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_UP = re.compile(r"(?<![\w.])\.\./[^\s`'\"()<>\[\]]*")


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def outside_links(path: Path, repo: Path = REPO) -> list[str]:
    """``file:line: target`` for each link or path in ``path`` that leads out of ``repo``."""
    text = path.read_text(encoding="utf-8")
    where = path.relative_to(repo)
    bad, link_spans = [], []
    for match in _LINK.finditer(text):
        group = 1 if match.group(1) is not None else 2
        target, span = match.group(group), match.span(group)
        link_spans.append(span)
        if _SCHEME.match(target) or target.startswith("#"):
            continue
        file_part = target.split("#", 1)[0]
        resolved = Path(file_part) if file_part.startswith("/") else (path.parent / file_part).resolve()
        if file_part.startswith("/") or not resolved.is_relative_to(repo.resolve()):
            bad.append(f"{where}:{_line(text, span[0])}: link {target} leaves the repository")
    for match in _UP.finditer(text):
        if not any(start <= match.start() < end for start, end in link_spans):
            bad.append(f"{where}:{_line(text, match.start())}: path {match.group().rstrip('.,;:')} leaves the repository")
    return bad


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_no_doc_links_or_paths_outside_the_repository(doc):
    assert outside_links(doc) == []


def test_the_check_finds_links_and_paths_that_leave_and_keeps_those_that_stay(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("")
    doc = tmp_path / "docs" / "_probe.md"
    text = ("see [the design](../../shared/DESIGN.md), [readme](../README.md), [up](../README.md#data),\n"
            "[web](https://example.org/../x) and ![fig](findings/delta_vs_full.svg);\n"
            "run `ctxcomp run x.yaml` with `../shared/data` beside it, or --data-dir ../data.\n"
            "[ref]: ../../elsewhere.md\n[root]: /etc/passwd\n")
    doc.write_text(text, encoding="utf-8")
    found = outside_links(doc, tmp_path)
    assert found == ["docs/_probe.md:1: link ../../shared/DESIGN.md leaves the repository",
                     "docs/_probe.md:4: link ../../elsewhere.md leaves the repository",
                     "docs/_probe.md:5: link /etc/passwd leaves the repository",
                     "docs/_probe.md:3: path ../shared/data leaves the repository",
                     "docs/_probe.md:3: path ../data leaves the repository"]
