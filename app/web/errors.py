"""Error pages in the product's look, for every status a user can meet."""

from flask import Flask, render_template
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException, InternalServerError

MESSAGES = {
    400: _l("The request could not be understood."),
    403: _l("You do not have access to this page."),
    404: _l("There is nothing here. It may belong to another account, or the link is wrong."),
    405: _l("That action is not allowed here."),
    409: _l("That conflicts with something already in progress."),
    413: _l("That request is too large."),
    429: _l("Too many failed attempts. Wait a few minutes, then try again."),
    500: _l("Something went wrong on our side. Nothing was charged for this request."),
    503: _l("The service is busy. Try again shortly."),
}


def init_app(app: Flask) -> None:
    """Register the error handlers."""

    @app.errorhandler(CSRFError)
    def csrf_error(exc: CSRFError):
        return _page(400, _("Your form expired or was not sent from this site. Reload and retry."))

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException):
        if exc.code is None or exc.code < 400:
            return exc
        return _page(exc.code, MESSAGES.get(exc.code, exc.description))

    @app.errorhandler(InternalServerError)
    def server_error(exc):
        return _page(500, MESSAGES[500])


def _page(code: int, message: str):
    return render_template("error.html", code=code, message=message), code
