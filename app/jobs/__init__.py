"""A job's life from submit to settle: transitions, what pages show, the runner, housekeeping.

May import app.points, app.assessment, app.caches, app.database, app.operations and the root
modules (config, extensions, models); never app.web.
"""
