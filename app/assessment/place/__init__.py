"""Where: from what a person typed to one place (an Area).

The resolver (names, codes, postal codes, street addresses, points and map URLs), the
gazetteer of current municipalities and its indexes, the 町丁目 a text means, and the Area.
What the published registers say (outlines, 町丁目, postal codes, changes, the keys names
are read by) is app.assessment.registers, below. May import app.assessment.registers,
app.assessment.errors and the root modules (config, extensions, models); never the sibling
sub-packages grid, sources or report, nor work.
"""
