"""The money: accounts, the points ledger, billing states and settling, incidents.

May import app.database, app.operations and the root modules (config, extensions, models);
never app.jobs, app.assessment, app.caches or app.web.
"""
