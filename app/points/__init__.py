"""The money: accounts, the points ledger, billing states and settling, incidents.

May import only the root modules (extensions, models, failpoints); never app.jobs,
app.assessment or app.web.
"""
