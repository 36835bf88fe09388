"""The forms; Flask-WTF adds the CSRF token to every one."""

from flask import request
from flask_wtf import FlaskForm
from wtforms import (
    EmailField,
    HiddenField,
    PasswordField,
    SelectChoice,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import DataRequired, Email, Length, ValidationError

LANGS = [SelectChoice("en", "English"), SelectChoice("ja", "日本語 (Japanese)")]


class Form(FlaskForm):
    """A FlaskForm whose fields read only the request's form fields.

    Flask-WTF would also fill them from uploaded files and JSON bodies; every field
    here is text, and a file or a number reaching a text validator was a 500. The
    forms are always filled from the request.
    """

    class Meta:
        def wrap_formdata(self, form, formdata):
            # The text fields of a urlencoded or multipart body, or nothing: not even
            # Flask-WTF's own reading, which fails on a JSON body that is not an object.
            return (request.form or None) if form.is_submitted() else None


def stripped(value: str | None) -> str | None:
    """Drop the spaces around a typed value."""
    return value.strip() if value else value


def printable(form, field) -> None:
    """Refuse control characters (a NUL cannot even be stored in PostgreSQL text)."""
    if field.data and any(ord(ch) < 32 or ord(ch) == 127 for ch in field.data):
        raise ValidationError("Remove the control characters from this field.")


class SignupForm(Form):
    email = EmailField(
        "Email",
        validators=[DataRequired("Enter your email address."), Length(max=254), printable, Email()],
        filters=[stripped],  # as login and the stored address do
    )
    password = PasswordField(
        "Password",
        validators=[
            DataRequired("Choose a password."),
            Length(min=8, max=128, message="Use 8 to 128 characters."),
        ],
    )


class LoginForm(Form):
    email = EmailField(
        "Email",
        validators=[DataRequired("Enter your email address."), Length(max=254), printable],
        filters=[stripped],
    )
    password = PasswordField(
        "Password", validators=[DataRequired("Enter your password."), Length(max=128)]
    )


class AssessmentForm(Form):
    query = StringField(
        "Place",
        validators=[
            DataRequired("Type a place: a city, a municipality code or an address."),
            Length(max=200, message="Keep the place under 200 characters."),
            printable,
        ],
        filters=[stripped],
    )
    lang = SelectField(
        "Report language",
        choices=LANGS,
        default="en",
        validate_choice=True,
    )
    # Set by the "start a new one anyway" button, after the form said a report exists.
    confirm = HiddenField()


class ReasonForm(Form):
    reason = TextAreaField(
        "Reason",
        validators=[
            DataRequired("Say why, for the record."),
            Length(max=1000, message="Keep the reason under 1,000 characters."),
        ],
        filters=[lambda s: s.replace("\x00", "") if s else s],
    )
