"""Operations: what the process tells the job page while it drains."""

from flask import Flask


def init_app(app: Flask) -> None:
    """Let templates ask whether this process is finishing its jobs before a restart."""
    runner = app.extensions["runner"]
    # A process flag, no query: the poll's fragment reads it for free.
    app.jinja_env.globals["draining"] = lambda: runner.draining
