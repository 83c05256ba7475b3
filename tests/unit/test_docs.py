"""The docs live in the repository: docs/api.md is the served OpenAPI document's, and no link leaves the tree."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]\n]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
AUTOLINK = re.compile(r"<((?:https?|ftp|file|mailto):[^>\s]+)>")
HTML_LINK = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
MARKDOWN_NAME = re.compile(r"(?<![\w/.-])([\w./-]+\.md)\b")


def _api_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_docs", ROOT / "scripts" / "api_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prose(text: str) -> str:
    """The text a reader follows links in: fenced blocks and inline code are examples, not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    body = prose(text)
    return [m.group(1) for pattern in (LINK, REFERENCE, AUTOLINK, HTML_LINK) for m in pattern.finditer(body)]


def link_problem(page: Path, target: str) -> str | None:
    """Why `target`, linked from `page`, is not a file or folder of this repository (None if it is)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
        return "leaves the repository"
    path = target.split("#", 1)[0]
    if not path:
        return None  # an anchor on the same page
    if path.startswith("/"):
        return "is absolute"
    resolved = (page.parent / path).resolve()
    if not resolved.is_relative_to(ROOT):
        return "leaves the repository"
    return None if resolved.exists() else "points to a missing file"


def test_docs_api_md_is_generated_from_the_served_openapi_document():
    api_docs = _api_docs()
    expected = api_docs.render(api_docs.openapi_document())
    assert (ROOT / "docs" / "api.md").read_text(encoding="utf-8") == expected, (
        "docs/api.md is stale: run `make docs` (scripts/api_docs.py)"
    )


def test_the_api_reference_names_every_route_and_schema_of_the_document():
    api_docs = _api_docs()
    document = api_docs.openapi_document()
    text = api_docs.render(document)
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"### `{method.upper()} {path}`" in text
    for name in document["components"]["schemas"]:
        assert f"### {name}\n" in text


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_the_readme_and_docs_stays_in_the_repository_and_resolves(page):
    problems = [f"{target} {why}" for target in links(page.read_text()) if (why := link_problem(page, target))]
    assert problems == [], f"{page.relative_to(ROOT)}: {problems}"


@pytest.mark.parametrize("page", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_markdown_file_the_readme_and_docs_name_is_in_the_repository(page):
    # Also in prose and code spans: "see NOTES.md" sends a reader to a file they must be able to open.
    named = {m.group(1) for m in MARKDOWN_NAME.finditer(FENCE.sub("", page.read_text()))}
    missing = [
        name for name in sorted(named) if not any((base / name).exists() for base in (page.parent, ROOT, ROOT / "docs"))
    ]
    assert missing == [], f"{page.relative_to(ROOT)} names files a reader of the repository does not have: {missing}"


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("https://example.com/x", "leaves the repository"),
        ("mailto:a@b.c", "leaves the repository"),
        ("../../shared/DESIGN.md", "leaves the repository"),
        ("/etc/passwd", "is absolute"),
        ("docs/nowhere.md", "points to a missing file"),
        ("docs/schedules.md#time-zones-and-dst", None),
        ("#quick-start", None),
        ("infra/checkov_skips.py", None),
    ],
)
def test_the_link_check_refuses_what_leaves_or_is_missing(target, problem):
    assert link_problem(ROOT / "README.md", target) == problem


def test_links_in_code_are_examples_not_links():
    text = "see [a](docs/a.md) and `[b](https://x.y)`\n```sh\ncurl [c](https://x.y)\n```\n<https://z.w>"
    assert links(text) == ["docs/a.md", "https://z.w"]


README_MOST_LINES = 250
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)


def test_the_readme_is_short_and_its_table_leads_to_every_docs_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= README_MOST_LINES, "the README is an overview: the rest belongs in docs/"
    linked = set(links(text))
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"docs/{p.name}" not in linked]
    assert unlinked == [], f"docs pages the README does not lead to: {unlinked}"


def opening(text: str) -> str:
    """The first paragraph after a page's title, past any HTML comment."""
    body = HTML_COMMENT.sub("", text).split("\n", 1)[1]
    return " ".join(body.strip().split("\n\n", 1)[0].split())


@pytest.mark.parametrize("page", sorted((ROOT / "docs").glob("*.md")), ids=lambda p: p.name)
def test_every_docs_page_opens_with_one_sentence_saying_what_it_is_for(page):
    text = page.read_text()
    assert text.startswith("# "), f"{page.name} has no title"
    first = opening(text)
    assert first.startswith("This page "), f"{page.name} opens with {first[:80]!r}"
    assert first.endswith(".") and not re.search(r"[.!?] [A-Z`*]", first), f"{page.name}: not one sentence: {first!r}"


@pytest.mark.parametrize(
    ("text", "first"),
    [
        ("# T\n\nThis page is for x.\n\nMore.", "This page is for x."),
        ("# T\n\n<!-- generated -->\n\nThis page is\nfor y.\n", "This page is for y."),
    ],
)
def test_the_opening_is_the_first_paragraph_past_comments(text, first):
    assert opening(text) == first


def test_the_architecture_opens_with_a_diagram_github_renders_and_one_executions_path():
    text = (ROOT / "docs" / "architecture.md").read_text()
    before_first_section = text.split("\n## ", 1)[0]
    diagram = re.search(r"^```mermaid\n(.*?)^```", before_first_section, re.M | re.S)
    assert diagram, "docs/architecture.md does not open with a Mermaid diagram"
    assert diagram.group(1).startswith("flowchart ")
    path = text.split("\n## One execution's path\n", 1)[1].split("\n## ", 1)[0]
    assert "| step | on AWS | locally (`duetime local`) |" in path
