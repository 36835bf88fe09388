"""Extension objects, bound to the app in create_app()."""

import logging

import flask_sqlalchemy
from flask_babel import Babel
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_wtf.csrf import CSRFProtect
from sqlalchemy import exc
from sqlalchemy.orm import DeclarativeBase

log = logging.getLogger(__name__)


class Base(DeclarativeBase):
    pass


class SQLAlchemy(flask_sqlalchemy.SQLAlchemy):
    """Flask-SQLAlchemy, whose end of a request outlives a connection the database dropped."""

    def _teardown_session(self, exc_value: BaseException | None) -> None:
        # The answer is made and what it says is committed. A connection the database
        # dropped since (an outage, a restart) fails only the ROLLBACK that ends the
        # request; raised from here, it turned the answer into a 500 that said nothing
        # was done (a submit whose job had started). SQLAlchemy has already invalidated
        # it, so the pool lets it go.
        try:
            self.session.remove()
        except exc.DBAPIError as error:
            if not error.connection_invalidated:
                raise
            self.session.registry.clear()
            log.warning("connection lost at the end of a request: %s", error.orig)


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()
csrf = CSRFProtect()
babel = Babel()
# Limits only where a view is decorated (log-in and sign-up POSTs): no default limits.
# The fast poll answers before Flask and never reaches it.
limiter = Limiter(key_func=get_remote_address, default_limits=[], strategy="moving-window")
