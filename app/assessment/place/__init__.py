"""Where: from what a person typed to one place (an Area) with its outline.

The resolver (names, codes, postal codes, street addresses, points and map URLs), the
gazetteer of current municipalities and the changes since its data, postal codes, the
street addresses' data, and outlines. May import app.assessment.errors and the root modules
(config, extensions, models); never the sibling sub-packages grid, sources or report, nor
work.
"""
