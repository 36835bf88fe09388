"""The caches in front of upstream services: single-flight in one process, and shared.

May import app.database and the root modules; never app.operations, app.points,
app.assessment, app.jobs or app.web.
"""
