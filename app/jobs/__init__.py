"""A job's life from submit to settle: transitions, what pages show, the runner, housekeeping.

May import app.points, app.assessment and the root modules (config, extensions, models,
failpoints, singleflight); never app.web.
"""
