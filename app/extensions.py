"""Extension objects, bound to the app in create_app()."""

from flask_limiter import Limiter
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()
csrf = CSRFProtect()
# One process holds every job and every request, so counters in memory are exact here.
limiter = Limiter(key_func=lambda: "global", storage_uri="memory://", headers_enabled=True)
