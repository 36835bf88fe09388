"""The forms; Flask-WTF adds the CSRF token to every one."""

from flask_wtf import FlaskForm
from wtforms import (
    EmailField,
    PasswordField,
    SelectChoice,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import DataRequired, Email, Length, ValidationError

LANGS = [SelectChoice("en", "English"), SelectChoice("ja", "日本語 (Japanese)")]


def printable(form, field) -> None:
    """Refuse control characters (a NUL cannot even be stored in PostgreSQL text)."""
    if field.data and any(ord(ch) < 32 or ord(ch) == 127 for ch in field.data):
        raise ValidationError("Remove the control characters from this field.")


class SignupForm(FlaskForm):
    email = EmailField(
        "Email",
        validators=[DataRequired("Enter your email address."), Length(max=254), printable, Email()],
    )
    password = PasswordField(
        "Password",
        validators=[
            DataRequired("Choose a password."),
            Length(min=8, max=128, message="Use 8 to 128 characters."),
        ],
    )


class LoginForm(FlaskForm):
    email = EmailField(
        "Email",
        validators=[DataRequired("Enter your email address."), Length(max=254), printable],
    )
    password = PasswordField(
        "Password", validators=[DataRequired("Enter your password."), Length(max=128)]
    )


class AssessmentForm(FlaskForm):
    query = StringField(
        "Place",
        validators=[
            DataRequired("Type a place: a city, a municipality code or an address."),
            Length(max=200, message="Keep the place under 200 characters."),
            printable,
        ],
        filters=[lambda s: s.strip() if isinstance(s, str) else s],
    )
    lang = SelectField(
        "Report language",
        choices=LANGS,
        default="en",
        validate_choice=True,
    )


class ReasonForm(FlaskForm):
    reason = TextAreaField(
        "Reason",
        validators=[
            DataRequired("Say why, for the record."),
            Length(max=1000, message="Keep the reason under 1,000 characters."),
        ],
        filters=[lambda s: s.replace("\x00", "") if isinstance(s, str) else s],
    )
