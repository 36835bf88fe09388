"""The database's reach and resilience: schema upgrades, the embedded server, outage retries.

May import only the root modules (config, extensions, models); never app.operations,
app.caches, app.points, app.assessment, app.jobs or app.web.
"""
