"""The README's first screen answers a newcomer's questions before the guarantees."""

import re
from pathlib import Path

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_the_first_screen_says_what_it_is_how_to_start_choose_a_port_get_points_and_help():
    first = README[: README.index("## What it guarantees")]
    assert len(first.splitlines()) <= 45  # one screen
    for needed in (
        "make run",
        "make test",
        "PORT=8080 make run",
        "grant-points",
        "create-support",
        "asks for the password",
        "/support",
    ):
        assert needed in first, needed
    assert "REPEATABLE READ" not in first and "trigger" not in first
    assert README.index("## What it guarantees") < README.index("## How it stays honest")


# --- docs/pattern.md: every reference names something that exists ------------------------

ROOT = Path(__file__).parent.parent
PATTERN = ROOT / "docs" / "pattern.md"
# `path::name` or `path::Class.method`, and any backticked path of the repository.
REFERENCE = re.compile(r"`([\w./-]+\.(?:py|html|sql))::([\w.]+)`")
PATH = re.compile(r"`((?:app|templates|migrations|tests|static|bench|scripts)/[\w./-]*)`")


def _defines(source: str, name: str) -> bool:
    """Tell whether a source defines name: a def, a class or a module-level assignment."""
    return bool(re.search(rf"^\s*(?:def|class) {name}\b|^{name}\s*[:=]", source, re.MULTILINE))


def test_every_reference_in_the_pattern_page_exists():
    text = PATTERN.read_text()
    references = REFERENCE.findall(text)
    assert len(references) >= 40, "the page maps the rules to functions"
    for path, dotted in references:
        file = ROOT / path
        assert file.is_file(), path
        source = file.read_text()
        parts = dotted.split(".")
        if path.endswith(".py") and not path.startswith("migrations/"):
            if len(parts) == 2:
                assert re.search(rf"^class {parts[0]}\b", source, re.MULTILINE), dotted
            assert _defines(source, parts[-1]), f"{path}::{dotted}"
        else:  # a test, a migration's trigger or index, a template's macro: named in it
            assert re.search(rf"\b{re.escape(parts[-1])}\b", source), f"{path}::{dotted}"
    for path in PATH.findall(text):
        assert (ROOT / path).exists(), path


def test_the_pattern_page_is_linked_from_the_readme_and_the_architecture():
    assert "(docs/pattern.md)" in README
    head = (ROOT / "docs" / "architecture.md").read_text().split("\n## ", 1)[0]
    assert "(pattern.md)" in head
