"""What it means: from what the services said to the report a person reads.

Levels from shares, the headline and score, the narrative, and provenance and credits as
printed. May import app.assessment.sources, app.assessment.grid, app.assessment.place,
app.assessment.registers, app.assessment.errors and the root modules; never work.
"""
