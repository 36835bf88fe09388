"""The faces: HTTP blueprints, the fast poll, forms, error pages and the flask commands.

May import everything below it (app.jobs, app.points, app.assessment, app.caches,
app.database, app.operations and the root modules);
nothing else in app/ imports from here, except create_app().
"""
