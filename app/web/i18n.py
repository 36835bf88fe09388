"""The interface's language and time zone, and the words for what the database stores.

The language is the user's saved choice (kept in the signed session, and for a signed-in
user in users.locale, copied into the session at log-in); before any choice, the browser's
Accept-Language; else English. The time zone is the saved one, else Asia/Tokyo. Both are
read from the session only, never with a query, so the status poll can choose them too.
"""

import functools
import re
from collections.abc import Mapping
from datetime import date, datetime
from importlib import resources
from types import SimpleNamespace
from typing import Any

from babel import Locale
from babel.dates import format_date
from babel.dates import format_datetime as babel_format_datetime
from babel.lists import format_list
from babel.support import Translations
from flask import g, request, session
from flask_babel import format_datetime, get_locale, get_timezone, gettext, ngettext
from jinja2 import pass_eval_context
from jinja2.nodes import EvalContext
from markupsafe import Markup
from werkzeug.datastructures import LanguageAccept
from werkzeug.http import parse_accept_header

from ..assessment import PlaceAmbiguous, PlaceNotFound
from ..assessment.errors import Named
from ..assessment.registers import addresses
from ..assessment.report.analysis import LAYERS
from ..points import accounts
from . import reasons

LANGUAGES = ("en", "ja")
DEFAULT_LANGUAGE = "en"
DEFAULT_TIMEZONE = "Asia/Tokyo"
NAMES = {"en": "English", "ja": "日本語"}  # each in its own language, as switches show them
LOCALES = {code: Locale.parse(code) for code in LANGUAGES}
# IANA's zones as the tzdata package lists them, not whatever the system's zoneinfo holds
# ("localtime", "posixrules"), less IANA's "Factory", a placeholder that is no place's time.
TIMEZONES = sorted(
    set(resources.files("tzdata").joinpath("zones").read_text().split()) - {"Factory"}
)


def N_(text: str) -> str:  # noqa: N802 - gettext's usual name for "mark, translate later"
    """Mark text for the catalog; it is translated where it is shown."""
    return text


@functools.lru_cache(maxsize=256)
def negotiate(accept_language: str | None) -> str:
    """Return the best of our languages for an Accept-Language header (cached per header)."""
    if not accept_language:
        return DEFAULT_LANGUAGE
    accepted = parse_accept_header(accept_language, LanguageAccept)
    return accepted.best_match(LANGUAGES, default=DEFAULT_LANGUAGE)


def language_of(session_data: Mapping[str, Any], accept_language: str | None) -> str:
    """Return the language of a request from its session and Accept-Language header."""
    chosen = session_data.get("lang")
    return chosen if chosen in LANGUAGES else negotiate(accept_language)


def select_locale() -> Locale:
    """Flask-Babel's locale selector; the fast poll (app/web/poll.py) sets g.locale itself."""
    if preset := g.get("locale"):
        return LOCALES[preset]
    return LOCALES[language_of(session, request.headers.get("Accept-Language"))]


def select_timezone() -> str:
    """Flask-Babel's time zone selector."""
    chosen = session.get("tz")
    return chosen if chosen in TIMEZONES else DEFAULT_TIMEZONE


def language() -> str:
    """Return the current interface language code ("en" or "ja")."""
    # The fast poll sets g.locale: one lookup, where Flask-Babel's get_locale() resolves
    # its context through three. Every other request asks Flask-Babel (force_locale too).
    if preset := g.get("locale"):
        return preset
    locale = get_locale()
    return locale.language if locale is not None else DEFAULT_LANGUAGE


def _get(area: Any, key: str) -> str:
    return area[key] if isinstance(area, Mapping) else getattr(area, key)


def place_label(area: Any) -> str:
    """Name a place with its prefecture, in the interface's language.

    "東京都府中市" in Japanese, "Fuchu, Tokyo" in English: names repeat across prefectures.
    A spot (an address or a point) is named by its 町丁目 where one is known:
    "東京都世田谷区三軒茶屋二丁目", "Sangenjaya 2-chome (三軒茶屋二丁目), Setagaya-ku, Tokyo"
    (romaji from Japan Post's reading of the town, where it lists one).
    """
    unit = _get(area, "prefecture_ja") + _get(area, "name_ja")
    street = spot_street(area)
    if language() == "ja":
        return unit + street
    if not street:
        return municipality_label(area)
    return f"{addresses.street_en(_get(area, 'code5'), street)}, {municipality_label(area)}"


def spot_street(area: Any) -> str:
    """Return the 町丁目 a spot was placed at or lies in ("丸の内一丁目"), else ""."""
    address = area.get("address") if isinstance(area, Mapping) else getattr(area, "address", None)
    if not address:
        return ""
    unit = _get(area, "prefecture_ja") + _get(area, "name_ja")
    return str(address.get("matched") or "").removeprefix(unit)


def municipality_label(area: Any) -> str:
    """Name the municipality alone, in the interface's language."""
    if language() == "ja":
        return _get(area, "prefecture_ja") + _get(area, "name_ja")
    # A city is known by its name alone in English ("Fuchu"); wards, towns and villages
    # keep their suffix ("Chuo-ku"), which tells them from the city of the same name.
    return f"{_get(area, 'name_romaji').removesuffix('-shi')}, {_get(area, 'prefecture_romaji')}"


def prefecture_label(area: Any) -> str:
    """Name an area's prefecture in the interface's language."""
    return _get(area, "prefecture_ja" if language() == "ja" else "prefecture_romaji")


def ambiguous_message(query: str, choices: list[Any]) -> str:
    """Say, in the interface's language, that a place names several municipalities."""
    where = format_list(
        list(dict.fromkeys(prefecture_label(a) for a in choices)), locale=get_locale()
    )
    return ngettext(
        '"%(query)s" matches %(num)d place, in %(where)s. '
        "Add the prefecture, or choose one by its local-government code.",
        '"%(query)s" matches %(num)d places, in %(where)s. '
        "Add the prefecture, or choose one by its local-government code.",
        len(choices),
        query=query,
        where=where,
    )


def place_message(exc: PlaceNotFound | PlaceAmbiguous) -> str:
    """Word the resolver's answer (not found, ambiguous, superseded) in the interface's language."""
    if exc.parts is None:
        return ambiguous_message(exc.query, exc.choices)
    locale = get_locale()
    sentences = [
        gettext(template, **{k: _listed(v, locale, k) for k, v in params.items()})
        for template, params in exc.parts
    ]
    return ("" if language() == "ja" else " ").join(sentences)


def _listed(value: Any, locale: Locale, key: str = "") -> Any:
    # A list of names reads "A and B" in English, "A、B" in Japanese; a name is Japanese
    # alone in Japanese; a date (ISO 8601) reads as the language writes dates.
    if isinstance(value, list):
        return format_list([_listed(v, locale) for v in value], locale=locale)
    if isinstance(value, Named):
        return value.ja if locale.language == "ja" else str(value)
    if key == "date" and isinstance(value, str | date):
        return format_date(date.fromisoformat(str(value)), "long", locale=locale)
    return value


# What the job's thread and the billing code store in English (steps, messages, ledger
# reasons), marked here so the catalog has them; job_text() words them when shown.
STORED = (
    N_("Waiting to start"),
    N_("Starting"),
    N_("Analysing"),
    N_("Report ready"),
    N_("Done"),
    N_("Your report is ready."),
    N_("The assessment was interrupted before it finished."),
    N_("The service restarted while your assessment was running."),
    N_("You had no point left when the assessment started."),
    N_("Your assessment could not start in time. No point was used."),
    N_("You cancelled this assessment."),
    N_("The assessment failed because of an error on our side."),
    N_("welcome points"),
    N_("points purchase"),
    N_("payment refunded"),
    N_("refund did not go through"),
    N_("points expired"),
    N_("granted by an operator"),
    N_("area assessment"),
    N_("refund: assessment did not complete"),
    N_("settled automatically: the ledger answered on a later try"),
    N_("unreachable"),
    N_("the connection failed"),
    N_("the answer is not valid JSON"),
    N_("the answer is not a JSON object"),
    N_("no such dataset"),
)
LAYER_NAMES = {layer.key: (layer.name_en, layer.name_ja) for layer in LAYERS}
# The stored texts with parts in them: (pattern, msgid); the groups are the msgid's names.
PATTERNS = (
    (re.compile(r"Fetching (?P<num>\d+) hazard layers"), N_("Fetching %(num)s hazard layers")),
    (
        re.compile(r"Fetched layer (?P<n>\d+) of (?P<total>\d+) \((?P<layer>\w+)\)"),
        N_("Fetched layer %(n)s of %(total)s (%(layer)s)"),
    ),
    (
        re.compile(r'The "(?P<dataset>[^"]*)" hazard data could not be fetched: (?P<reason>.*)\.'),
        N_('The "%(dataset)s" hazard data could not be fetched: %(reason)s.'),
    ),
    (
        re.compile(r"Support reviewed this assessment: (?P<reason>.*)", re.S),
        N_("Support reviewed this assessment: %(reason)s"),
    ),
    (re.compile(r"refund by support: (?P<reason>.*)", re.S), N_("refund by support: %(reason)s")),
    # An incident's resolution (app/points/billing.py settle_by_support).
    (re.compile(r"refund: (?P<reason>.*)", re.S), N_("refund: %(reason)s")),
    (re.compile(r"no refund due: (?P<reason>.*)", re.S), N_("no refund due: %(reason)s")),
    # A payment's incident, resolved by support (app/points/incidents.py resolve_payment).
    (re.compile(r"settled: (?P<reason>.*)", re.S), N_("settled: %(reason)s")),
)


def job_text(text: str | None) -> str:
    """Word a stored step, message or ledger reason in the interface's language."""
    lang = language()
    if not text or lang == DEFAULT_LANGUAGE:
        return text or ""  # stored in English already
    return _stored_text(lang, text)


@functools.lru_cache(maxsize=1024)
def _stored_text(lang: str, text: str) -> str:
    # Cached: a poll shows the same few steps again and again ("Fetched layer 2 of 5 ...").
    translated = CATALOGS[lang].ugettext(text)
    if translated != text:
        return translated
    for pattern, msgid in PATTERNS:
        if match := pattern.fullmatch(text):
            parts = match.groupdict()
            if "layer" in parts:
                parts["layer"] = LAYER_NAMES.get(parts["layer"], (parts["layer"],) * 2)[1]
            if "reason" in parts and pattern.pattern.startswith("The"):
                # A provider's failure: the dataset and the reason in words, never codes.
                parts["reason"] = reasons.reason_ja(parts["reason"])
                parts["dataset"] = reasons.dataset_name(parts["dataset"], lang)
            return CATALOGS[lang].ugettext(msgid) % parts
    return text


def remember(user) -> None:
    """Carry a user's saved language and time zone into the session at log-in.

    A choice made before signing in, with none saved yet, is saved to the account.
    """
    if user.locale:
        session["lang"] = user.locale
    elif session.get("lang") in LANGUAGES:
        accounts.set_preferences(user.id, locale=session["lang"])
    if user.timezone:
        session["tz"] = user.timezone


# The compiled catalogs, one per language, loaded once (as Flask-Babel caches its own).
CATALOGS: dict[str, Translations] = {}


def catalog() -> Translations:
    """Return the current language's catalog (a dictionary lookup on the fast poll)."""
    return CATALOGS[language()]


def init_jinja(app) -> None:
    """Offer the templates the helpers that word places, stored texts and dates."""
    directory = app.extensions["babel"].translation_directories[0]
    for code in LANGUAGES:
        CATALOGS.setdefault(code, Translations.load(directory, [code]))
    # The status fragment is rendered on every poll: its gettext calls go straight to the
    # catalog. Through Flask-Babel's own callables each string resolved the request
    # context three times, and the poll's render took 4 to 5 times as long.
    app.jinja_env.install_gettext_callables(
        gettext=lambda s: catalog().ugettext(s),
        ngettext=lambda s, p, n: catalog().ungettext(s, p, n),
        pgettext=lambda c, s: catalog().upgettext(c, s),
        npgettext=lambda c, s, p, n: catalog().unpgettext(c, s, p, n),
        newstyle=True,
    )
    # `_` as Jinja's newstyle gettext does it (escape, always %-format), in one call
    # instead of Jinja's alias calling its wrapper calling the function.
    app.jinja_env.globals["_"] = _template_gettext
    # Few globals: Jinja copies every one into each render's context and checks them again
    # for each import, which cost the poll's render 1.5 us a global. Unused ones go, and
    # the helpers share one name.
    for unused in ("gettext", "pgettext", "npgettext"):
        app.jinja_env.globals.pop(unused, None)
    app.jinja_env.globals["i18n"] = SimpleNamespace(
        language=language,
        place_label=place_label,
        street_en=addresses.street_en,
        names=NAMES,
        languages=LANGUAGES,
        dataset_name=reasons.dataset_name,
        hazard_name=reasons.hazard_name,
        provider_names=reasons.provider_names,
        reason=reasons.probe_reason,
    )
    app.jinja_env.filters.update(job_text=job_text, when=when)


@pass_eval_context
def _template_gettext(eval_ctx: EvalContext, string: str, **variables: Any) -> str:
    text = catalog().ugettext(string)
    markup = Markup(text) if eval_ctx.autoescape else text
    # Formatting without variables only turns "%%" into "%": skip it when there is none.
    return markup % variables if variables or "%" in text else markup


def when(value: Any, lang: str | None = None) -> str:
    """Format a timestamp (a datetime, or ISO 8601 text) in the user's time zone and locale.

    With lang, in that language's own format: a report dates itself as it is written.
    """
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if lang in LOCALES:
        return babel_format_datetime(value, "medium", tzinfo=get_timezone(), locale=LOCALES[lang])
    return format_datetime(value)
