"""The grids laid over a place, and the pixel work on them.

Which map tiles an assessment reads (zones: plan, zoom, masks) and how their pixels are
read (tiles: decoding, counting over the outline; legends: what each colour means;
pixels: the optional process pool; locate: the pixel under a spot and the nearest zone),
and the 250 m meshes the mesh services are asked at (sampling). Pure work on bytes, arrays
and outlines: no service is asked here. May import app.assessment.place,
app.assessment.registers, app.assessment.errors and the root modules; never sources, report
nor work.
"""
