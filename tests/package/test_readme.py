"""The README is a front page: its title, one sentence, the two commands first, at most 150 lines,
and links into docs/ that resolve. The guide itself lives in docs/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

SETUP_AND_RUN = ("bash tools/setup.sh && .venv/bin/python tools/rewrite_metas.py "
                 "&& .venv/bin/python tools/demo.py")
SETUP_AND_TEST = "bash tools/setup.sh && .venv/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder"
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _lines() -> list[str]:
    return README.read_text(encoding="utf-8").splitlines()


def _commands(lines: list[str]) -> list[str]:
    """Every shell command the README shows, in order: the lines of fenced blocks in a shell
    language (or none) and of indented code blocks."""
    commands, fence, indented, previous_blank = [], None, False, True
    for line in lines:
        if fence is None and line.startswith("```"):
            fence = line[3:].strip()
        elif fence is not None and line.startswith("```"):
            fence = None
        elif fence is not None:
            if fence in SHELL_LANGUAGES and line.strip():
                commands.append(line.strip())
        elif line.startswith("    ") and line.strip() and (indented or previous_blank):
            indented = True
            commands.append(line.strip())
        elif line.strip():
            indented = False
        previous_blank = fence is None and not line.strip()
    return commands


def _intro(lines: list[str]) -> str:
    """The text between the title and the first code block."""
    end = next(i for i, line in enumerate(lines) if line.startswith("```"))
    return " ".join(line.strip() for line in lines[1:end] if line.strip())


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lstrip("#").strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(line) for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


def _local_links(path: Path) -> list[tuple[Path, str]]:
    links = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        links.append(((path.parent / file_part).resolve() if file_part else path, anchor))
    return links


def test_the_readme_opens_with_its_title():
    assert _lines()[0] == "# metatrace"


def test_the_title_is_followed_by_one_sentence():
    intro = _intro(_lines())
    assert intro.endswith(".") and not re.search(r"[.!?]\s+[A-Z`\[]", intro), intro


def test_the_first_command_sets_up_and_runs_the_main_job():
    assert _commands(_lines())[0] == SETUP_AND_RUN


def test_the_second_command_sets_up_and_runs_the_tests():
    assert _commands(_lines())[1] == SETUP_AND_TEST


def test_the_readme_is_at_most_150_lines():
    assert len(_lines()) <= 150


def test_the_second_command_is_the_one_ci_runs():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert ci[-1] == _commands(_lines())[1]


def test_every_docs_link_in_the_readme_points_to_an_existing_file():
    missing = [str(p) for p, _ in _local_links(README) if DOCS in p.parents and not p.is_file()]
    assert missing == []


def test_the_readme_links_to_the_guide():
    assert any(DOCS in p.parents for p, _ in _local_links(README))


def test_every_link_between_guide_pages_points_to_an_existing_file():
    missing = [f"{page.name} -> {p}" for page in DOCS.glob("*.md") for p, _ in _local_links(page) if not p.exists()]
    assert missing == []


def test_every_anchor_of_a_link_names_a_heading():
    pages = [README, *DOCS.glob("*.md")]
    broken = [f"{page.name} -> {p.name}#{anchor}" for page in pages for p, anchor in _local_links(page)
              if anchor and p.suffix == ".md" and p.is_file() and anchor not in _anchors(p)]
    assert broken == []
