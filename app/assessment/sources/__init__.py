"""What the services say: every public service's provider and the client that asks them.

The pooled HTTP client and its retry policy, the hazard map portal's tiles (their plan over
a place, their decoding and legends), J-SHIS, the GSI services, the demo provider, and the
data's terms of use. May import app.assessment.place, app.assessment.errors, app.caches and
the root modules; never app.assessment.report nor work.
"""
