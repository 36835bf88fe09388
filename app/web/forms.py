"""The forms; Flask-WTF adds the CSRF token to every one."""

import uuid

from flask import request
from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import (
    EmailField,
    HiddenField,
    IntegerField,
    PasswordField,
    SelectChoice,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import AnyOf, DataRequired, Email, Length, NumberRange, ValidationError

from .i18n import DEFAULT_TIMEZONE, LANGUAGES, NAMES, TIMEZONES

INTERFACE_LANGUAGES = list(LANGUAGES)
# Each language named in itself, as a reader looking for their own would recognise it.
INTERFACE_CHOICES = [SelectChoice(code, NAMES[code]) for code in LANGUAGES]
LANGS = [SelectChoice("en", _l("English")), SelectChoice("ja", _l("Japanese"))]


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


# Bidirectional controls (Unicode's Bidi_Control property): U+202E and its kin reorder
# what the support console shows around them, so "ああ\u202eevil" reads as something else.
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def printable(form, field) -> None:
    """Refuse control characters (a NUL cannot even be stored in PostgreSQL text), the
    bidirectional ones among them."""
    if field.data and any(
        ord(ch) < 32 or 127 <= ord(ch) < 160 or ch in BIDI_CONTROLS for ch in field.data
    ):
        raise ValidationError(_l("Remove the control characters from this field."))


def no_bidi(form, field) -> None:
    """Refuse bidirectional controls in a text that may span lines (a reason)."""
    if field.data and any(ch in BIDI_CONTROLS for ch in field.data):
        raise ValidationError(_l("Remove the control characters from this field."))


def email_field(label, required, *more) -> EmailField:
    """An email address as every form takes it: required, printable, 254 characters at
    most, and stripped, as the stored address is."""
    return EmailField(
        label,
        validators=[DataRequired(required), Length(max=254), printable, *more],
        filters=[stripped],
    )


def new_password_field(label) -> PasswordField:
    """A password being chosen, at sign-up or on the account page: 8 to 128 characters."""
    return PasswordField(
        label,
        validators=[
            DataRequired(_l("Choose a password.")),
            Length(min=8, max=128, message=_l("Use 8 to 128 characters.")),
        ],
    )


class SignupForm(Form):
    email = email_field(
        _l("Email"),
        _l("Enter your email address."),
        Email(),  # WTForms words it, in Japanese too (its own catalog)
    )
    password = new_password_field(_l("Password"))


class LoginForm(Form):
    email = email_field(_l("Email"), _l("Enter your email address."))
    password = PasswordField(
        _l("Password"), validators=[DataRequired(_l("Enter your password.")), Length(max=128)]
    )


class AssessmentForm(Form):
    query = StringField(
        _l("Place"),
        validators=[
            DataRequired(_l("Type a place: a city, a municipality code or an address.")),
            Length(max=200, message=_l("Keep the place under 200 characters.")),
            printable,
        ],
        filters=[stripped],
    )
    lang = SelectField(
        _l("Report language"),
        choices=LANGS,
        default="en",  # the view sets the interface's language
        validate_choice=True,
    )
    # Set by the "start a new one anyway" button, after the form said a report exists.
    confirm = HiddenField()


class ReasonForm(Form):
    reason = TextAreaField(
        _l("Reason"),
        validators=[
            DataRequired(_l("Say why, for the record.")),
            Length(max=1000, message=_l("Keep the reason under 1,000 characters.")),
            no_bidi,
        ],
        filters=[lambda s: s.replace("\x00", "") if s else s],
    )


class LanguageForm(Form):
    """The switch on every page: one button per language."""

    lang = StringField(validators=[DataRequired(), AnyOf(INTERFACE_LANGUAGES)])


class PasswordForm(Form):
    current_password = PasswordField(
        _l("Current password"), validators=[DataRequired(_l("Enter your current password."))]
    )
    new_password = new_password_field(_l("New password"))


class PreferencesForm(Form):
    lang = SelectField(_l("Language"), choices=INTERFACE_CHOICES, validate_choice=True)
    timezone = SelectField(
        _l("Time zone"),
        choices=[SelectChoice(name, name) for name in TIMEZONES],
        default=DEFAULT_TIMEZONE,
        validate_choice=True,
    )


def nonzero(form, field) -> None:
    if field.data == 0:
        raise ValidationError(_l("Give a number of points other than 0."))


class AdjustPointsForm(ReasonForm):
    """Support's grant (positive) or correction (negative) of a user's points, with a reason."""

    email = email_field(_l("User's email"), _l("Enter the user's email address."))
    amount = IntegerField(
        _l("Points (negative to take back)"),
        validators=[
            DataRequired(_l("Give a number of points other than 0.")),
            NumberRange(-10000, 10000, message=_l("Give between -10,000 and 10,000 points.")),
            nonzero,
        ],
    )
    # One value per page served: a second submit of the same page records nothing.
    nonce = HiddenField(
        validators=[
            DataRequired(_l("Reload the page: this form has expired.")),
            Length(max=64),
        ],
        default=lambda: uuid.uuid4().hex,
    )
