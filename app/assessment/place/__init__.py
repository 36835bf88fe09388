"""Where: from what a person typed to one place (an Area) with its outline.

The resolver (names, codes, postal codes, points and map URLs), the gazetteer of current
municipalities and the changes since its data, postal codes, outlines, and the 250 m meshes
laid over a place. May import app.assessment.errors and the root modules (config,
extensions, models); never the sibling sub-packages sources or report, nor work.
"""
