"""Every relative link in README.md and docs/*.md resolves: the file exists, and its #anchor
names a heading there (GitHub's slugs), so moving a section cannot leave a link behind."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _unfenced(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _prose(text: str) -> str:
    """The text outside fenced blocks and inline code, where a link is a link."""
    return re.sub(r"`[^`\n]*`", "", _unfenced(text))


def anchors(path: Path) -> set[str]:
    """The #anchors GitHub makes of a page's headings (a repeated one gets -1, -2, …)."""
    seen: dict[str, int] = {}
    found = set()
    for line in _unfenced(path.read_text()).splitlines():
        if not (m := re.match(r"#{1,6}\s+(.*)", line)):
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not ours to check here
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            broken.append(f"{target} (no such heading)")
    return broken


def test_every_relative_link_and_anchor_in_the_readme_and_docs_resolves():
    broken = {str(page.relative_to(ROOT)): found for page in PAGES if (found := broken_links(page))}
    assert broken == {}


def test_a_missing_file_and_a_missing_heading_are_both_found(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n## The part, with `code`\n## Other page\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#the-part-with-code) [ok](other.md#other-page-1) [ok](#here)\n"
        "# Here\n[gone](missing.md) [gone](other.md#nowhere) [web](https://example.com/x#y)\n"
        "`[not a link](nowhere.md)`\n"
    )
    assert broken_links(page) == ["missing.md (no such file)", "other.md#nowhere (no such heading)"]


def test_the_readme_stays_short_and_links_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    linked = {target.partition("#")[0] for target in LINK.findall(_prose(readme))}
    unlinked = [
        p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"docs/{p.name}" not in linked
    ]
    assert unlinked == []
