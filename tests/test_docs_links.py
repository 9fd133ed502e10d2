"""Every relative link in the README, the contributor guide and docs/ points at a file, and a heading, that exist."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")],
    key=lambda path: str(path),
)
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", flags=re.S | re.M)
# [text](target) and ![alt](target); the target ends at whitespace or ")".
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", flags=re.M)


def without_code(markdown):
    """`markdown` without fenced blocks and inline code spans (links there are not links)."""
    markdown = FENCE.sub("", markdown)
    return re.sub(r"`[^`\n]*`", "", markdown)


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    """The anchors of a Markdown file's headings, with GitHub's -1, -2 for repeats."""
    seen = {}
    result = set()
    for _, heading in HEADING.findall(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def relative_links(path):
    """`(target, anchor)` of each link in `path` that is not a URL."""
    for target in LINK.findall(without_code(path.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        yield file_part, anchor


def test_slugs_follow_githubs_rules():
    assert slug("CTranslate2 peer (`decode_speed.py --ctranslate2`, issue 14)") == (
        "ctranslate2-peer-decode_speedpy---ctranslate2-issue-14"
    )
    assert slug("Dropout of `transformer_small` (2026-12-02)") == "dropout-of-transformer_small-2026-12-02"
    assert slug("The demo, on real data") == "the-demo-on-real-data"
    assert slug("Path 1: your own script with `model.fit`") == "path-1-your-own-script-with-modelfit"


@pytest.mark.parametrize("page", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_point_at_files_and_headings_that_exist(page):
    assert page.is_file(), page
    broken = []
    for file_part, anchor in relative_links(page):
        target = (page.parent / file_part).resolve() if file_part else page
        if not target.exists():
            broken.append(f"{file_part}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{file_part}#{anchor}: no such heading in {target.relative_to(ROOT)}")
    assert broken == [], "\n".join(broken)


def test_the_pages_link_to_each_other():
    # The README leads to the map of the docs, and the map to every page.
    readme = {file_part for file_part, _ in relative_links(ROOT / "README.md")}
    assert "docs/index.md" in readme and "CONTRIBUTING.md" in readme
    index = {file_part for file_part, _ in relative_links(ROOT / "docs" / "index.md")}
    for page in (ROOT / "docs").glob("*.md"):
        if page.name != "index.md":
            assert page.name in index, f"docs/index.md does not link to {page.name}"
