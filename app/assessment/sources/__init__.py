"""What the services say: every public service's provider and the client that asks them.

The pooled HTTP client and its retry policy, the hazard map portal's tiles (real and the
demo's painted ones), J-SHIS, the GSI services (base map, address search), the demo
provider, coverage, and the data's terms of use. May import app.assessment.grid,
app.assessment.place, app.assessment.registers, app.assessment.errors, app.caches and the
root modules; never app.assessment.report nor work.
"""
