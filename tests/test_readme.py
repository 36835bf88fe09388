"""The README's first screen answers a newcomer's questions before the guarantees."""

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
