"""Every ```python block of the README and of docs/ runs, so the docs cannot drift from the code.

A page's blocks run in order, in one namespace, in a fresh process (a block enables metatrace, as
a reader would): a later block may use what an earlier one made (the README's ``explain`` reads
the quick start's ``jf``). A traceback names the page and its line. A block that cannot run here
(it needs several processes, or trains a model for minutes) says so on the line before it, with
its reason:

    <!-- not run: needs torch.distributed initialized -->
    ```python
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NOT_RUN = re.compile(r"<!-- not run: (\S.*?) -->")
FENCE = "```"

# Runs the blocks given as JSON ``[[page, first line, code], ...]`` in one namespace; each is
# compiled at its page's line numbers.
RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for page, line, code in json.loads(sys.argv[1]):
    exec(compile("\\n" * (line - 1) + code, page, "exec"), namespace)
"""


@dataclass
class Block:
    page: Path
    line: int  # the block's first line of code, counted from 1
    code: str
    not_run: str | None  # why the block is not run, or None


def blocks(page: Path) -> list[Block]:
    """The ```python blocks of ``page``, each with the reason of a ``<!-- not run: ... -->`` on
    the last non-blank line before its fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        if lines[i].strip() != FENCE + "python":
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == FENCE)
        before = next((line.strip() for line in reversed(lines[:i]) if line.strip()), "")
        marker = NOT_RUN.fullmatch(before)
        code = textwrap.dedent("\n".join(lines[i + 1:end])) + "\n"
        found.append(Block(page, i + 2, code, marker.group(1) if marker else None))
        i = end + 1
    return found


def _runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.not_run is None]


@pytest.mark.parametrize("page", [p for p in PAGES if _runnable(p)], ids=lambda p: p.name)
def test_every_runnable_block_of_the_page_runs(page):
    todo = [[str(b.page.relative_to(ROOT)), b.line, b.code] for b in _runnable(page)]
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(todo)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]


def test_every_not_run_marker_gives_a_reason_and_precedes_a_block():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        markers = [line.strip() for line in text.splitlines() if line.strip().startswith("<!-- not run")]
        assert all(NOT_RUN.fullmatch(m) for m in markers), (page.name, markers)
        assert len(markers) == sum(b.not_run is not None for b in blocks(page)), page.name


def test_the_reader_sees_runnable_and_marked_blocks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```python\nx = 1\n```\n\n<!-- not run: needs two GPUs -->\n\n"
                    "```python\ny = 2\n```\n\n- a list:\n\n  ```python\n  z = 3\n  ```\n")
    assert [(b.line, b.code, b.not_run) for b in blocks(page)] == [
        (4, "x = 1\n", None), (10, "y = 2\n", "needs two GPUs"), (16, "z = 3\n", None)]


def test_a_failing_block_names_its_page_and_line(tmp_path):
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps([["docs/page.md", 7, "x = 1\nraise KeyError(x)\n"]])],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and 'File "docs/page.md", line 8' in done.stderr
