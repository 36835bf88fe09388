"""A job's life from submit to settle: transitions, what pages show, the runner, housekeeping.

May import app.points, app.caches, app.database, app.operations and the root
modules (config, extensions, models); never app.web, nor app.assessment: what a job computes
is its work's, known only through work.py's contract.
"""
