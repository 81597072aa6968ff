"""The README stays one page for a user, docs/ARCHITECTURE.md a short map: their sizes,
and no table cell on the architecture page that is a page of its own."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 200
ARCHITECTURE_MAX_LINES = 150
CELL_MAX_CHARS = 300


def table_cells(text: str):
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("|"):
            for cell in re.split(r"(?<!\\)\|", line.strip().strip("|")):
                yield number, cell.strip()


def test_readme_is_one_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {README_MAX_LINES}: move detail into docs/")


def test_architecture_page_is_a_short_map():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert len(text.splitlines()) <= ARCHITECTURE_MAX_LINES
    long = [(n, len(c)) for n, c in table_cells(text) if len(c) > CELL_MAX_CHARS]
    assert not long, f"docs/ARCHITECTURE.md: table cells over {CELL_MAX_CHARS} characters " \
                     f"(line, length): {long}"


def test_cell_finder_finds_a_long_cell():
    assert [len(c) for _, c in table_cells(f"| a | {'x' * 301} |\n")] == [1, 301]
    assert [c for _, c in table_cells("| a \\| b | c |\n")] == ["a \\| b", "c"]
