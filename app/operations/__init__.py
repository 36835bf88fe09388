"""What operators see and steer: metrics, event logs, alerts, and the test-only failpoints.

May import only the root modules (config, extensions, models); never app.database,
app.caches, app.points, app.assessment, app.jobs or app.web.
"""
