"""Accounts: creating users with their signup points, and checking passwords."""

import functools
import secrets

from psycopg.errors import UniqueViolation
from sqlalchemy import func, select, text, update
from sqlalchemy.exc import IntegrityError
from werkzeug.security import check_password_hash, generate_password_hash

from ..extensions import db
from ..models import Role, User
from . import ledger


class EmailTaken(Exception):
    """An account with this email (in any letter case) exists."""


def create_user(email: str, password: str, points: int, role: Role = Role.USER) -> User:
    """Create a user, granting their starting points in the same transaction."""
    user = User(
        email=email.strip().lower(), password_hash=generate_password_hash(password), role=role.value
    )
    db.session.add(user)
    try:
        db.session.flush()
        if points > 0:
            ledger.grant(user.id, points, reason="welcome points")
        db.session.commit()
    except IntegrityError as exc:
        db.session.rollback()
        if isinstance(exc.orig, UniqueViolation):
            raise EmailTaken(email) from exc
        raise
    db.session.refresh(user)
    return user


def find_by_email(email: str) -> User | None:
    """Return the user with this email, in any letter case."""
    return db.session.scalar(select(User).where(func.lower(User.email) == email.strip().lower()))


@functools.cache
def dummy_hash() -> str:
    """Return a hash made as a user's password's is (same method and cost) of no one's."""
    return generate_password_hash(secrets.token_hex(16))


def authenticate(email: str, password: str) -> User | None:
    """Return the user if the password is right, else None."""
    user = find_by_email(email)
    return user if password_matches(user, password) else None


def password_matches(user: User | None, password: str) -> bool:
    """Tell whether the password is the user's (looked up beforehand, None if unknown)."""
    if user is None:
        # An unknown email costs the same hash check as a wrong password: otherwise the
        # time of the answer tells which emails have accounts.
        check_password_hash(dummy_hash(), password)
        return False
    return check_password_hash(user.password_hash, password)


def set_preferences(user_id: int, **choices: str) -> None:
    """Save a user's interface language (locale) and/or time zone."""
    columns = {name: value for name, value in choices.items() if name in ("locale", "timezone")}
    db.session.execute(update(User).where(User.id == user_id).values(**columns))
    db.session.commit()


def end_sessions(user_id: int) -> int:
    """Revoke every session of the user, on every device: bump the session generation.

    Return the new generation. Device cookies (app/web/devices.py) name the generation too,
    so they are retired with the sessions.
    """
    generation = db.session.scalar(
        text(
            "UPDATE users SET session_generation = session_generation + 1 WHERE id = :u"
            " RETURNING session_generation"
        ),
        {"u": user_id},
    )
    db.session.commit()
    return generation


def change_password(user_id: int, password: str) -> User:
    """Set a new password and end every session but the one the caller signs in again.

    The session generation moves in the same statement: no copy of an old cookie, here
    or anywhere, outlives the password it was signed in with.
    """
    db.session.execute(
        text(
            "UPDATE users SET password_hash = :h, session_generation = session_generation + 1"
            " WHERE id = :u"
        ),
        {"u": user_id, "h": generate_password_hash(password)},
    )
    db.session.commit()
    user = db.session.get(User, user_id)
    db.session.refresh(user)
    return user


def session_alive(user_id: int, generation: int) -> bool:
    """Tell whether a session of this user and generation is still valid."""
    return (
        db.session.execute(
            text("SELECT 1 FROM users WHERE id = :u AND session_generation = :g"),
            {"u": user_id, "g": generation},
        ).first()
        is not None
    )
