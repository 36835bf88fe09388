"""The README is read in five minutes; what it leaves out is in docs/, and the docs hold true.

Its first screen answers a newcomer's questions before the guarantees; configuration,
payments, brakes, operations and deployment have a page each under docs/, linked from it.
"""

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


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


def test_the_readme_is_short_and_ends_with_where_everything_else_is():
    assert len(README.splitlines()) <= 150
    last = README[README.rindex("\n## ") :]
    assert last.startswith("\n## Where everything else is")
    for page in (
        "pattern",
        "architecture",
        "configuration",
        "payments",
        "brakes",
        "operations",
        "deployment",
    ):
        assert f"(docs/{page}.md)" in last, page


# Environment variables read in the code itself, not through app/config.py's SETTINGS.
READ_FROM_ENVIRON = re.compile(r"os\.(?:environ(?:\.get)?[\[(]|getenv\()\s*[\"']([A-Z][A-Z0-9_]+)")


def test_every_environment_variable_is_documented_in_the_configuration_page():
    from app.config import SETTINGS

    page = (DOCS / "configuration.md").read_text()
    sources = [*ROOT.joinpath("app").rglob("*.py"), ROOT / "gunicorn.conf.py", ROOT / "wsgi.py"]
    read = {name for file in sources for name in READ_FROM_ENVIRON.findall(file.read_text())}
    assert {"DATABASE_URL", "SECRET_KEY", "PORT", "WEB_CONCURRENCY"} <= read
    for name in sorted({*SETTINGS, *read}):
        assert f"`{name}`" in page, name


def test_every_relative_link_in_the_readme_and_docs_leads_to_a_file():
    pages = [ROOT / "README.md", *DOCS.glob("*.md"), ROOT / "bench" / "README.md"]
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor in the same page
            path = target.split("#", 1)[0]
            assert (page.parent / path).exists(), f"{page.relative_to(ROOT)}: {target}"


# --- docs/pattern.md: every reference names something that exists ------------------------

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
