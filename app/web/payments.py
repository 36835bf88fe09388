"""Buying points: the buy page, Stripe Checkout, the page after paying, Stripe's webhook,
and the pages a shop in Japan must show (特定商取引法に基づく表記, terms).

The money logic is app/points/ (checkout.py, purchases.py and the rooms it hands events to,
receipts.py); this module verifies, brakes and answers.
"""

import json
import logging
import os
import re
from urllib.parse import urlsplit

import stripe
from flask import (
    Blueprint,
    Flask,
    abort,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user, login_required

from ..assessment import make_provider, resolve_place, run_assessment
from ..caches.singleflight import SingleFlightCache
from ..config import is_on
from ..extensions import csrf, limiter
from ..points import checkout, purchases, receipts
from . import i18n
from .headers import CSP, talisman

log = logging.getLogger(__name__)

bp = Blueprint("payments", __name__)

# The buy page's form is answered with a redirect to Stripe's hosted page: the browser
# follows it only if the page's form-action allows Stripe's origin.
CHECKOUT_CSP = {**CSP, "form-action": "'self' https://checkout.stripe.com"}


def packs() -> dict[int, checkout.Pack]:
    return current_app.extensions["point_packs"]


def serving_demo_data() -> bool:
    """Return whether reports are made from demonstration data at this moment.

    The shop's one reading of the provider state, taken at each request (the provider may
    change while the app runs): points bought now must buy reports of real data.
    """
    return bool(current_app.extensions["layer_provider"].is_demo)


def public_url() -> str:
    """The site's address for Stripe's return URLs: PUBLIC_URL, never a request's Host.

    Unset, only a test-mode key (development) gets `make run`'s own address; a live key
    sells nothing without it.
    """
    config = current_app.config
    if config["PUBLIC_URL"]:
        return config["PUBLIC_URL"].rstrip("/")
    if checkout.live_mode(config):
        return ""
    return f"http://127.0.0.1:{os.environ.get('PORT', '8000')}"


def not_on_sale() -> str | None:
    """Say why points cannot be bought now (payments, seller, public_url, demo_data), or None."""
    config = current_app.config
    if not checkout.configured(config) or not packs():
        return "payments"
    if checkout.seller_missing(config):
        return "seller"
    if not public_url():
        return "public_url"
    if serving_demo_data() and not is_on(config["TEST_SHOP"]):
        return "demo_data"
    return None


def _on_sale() -> bool:
    return not_on_sale() is None


@bp.get("/points/buy")
@login_required
@talisman(content_security_policy=CHECKOUT_CSP)
def buy_page():
    """Show the packs, or say that purchases are not set up and how to get points instead."""
    if request.args.get("cancelled"):
        flash(_("Payment cancelled: nothing was charged."), "info")
    reason = not_on_sale()
    if reason in ("seller", "public_url"):
        log.warning("points not on sale: %s", _setup_gap(reason))
    return render_template(
        "payments/buy.html",
        packs=packs().values(),
        on_sale=reason is None,
        reason=reason,
        test_shop=is_on(current_app.config["TEST_SHOP"]),
    )


def _setup_gap(reason: str) -> str:
    if reason == "seller":
        return "set " + ", ".join(checkout.seller_missing(current_app.config))
    return "set PUBLIC_URL (a live Stripe key sells only with it)"


def _user_key() -> str:
    return f"buy:{current_user.id}"


@bp.post("/points/buy")
@login_required
@limiter.limit(lambda: current_app.config["BUY_RATE_LIMIT"], key_func=_user_key, scope="buy")
def buy():
    """Create a Checkout Session for the chosen pack and send the browser to it (303)."""
    if not _on_sale():
        flash(_("Points are not on sale at present: nothing was charged."), "error")
        return redirect(url_for(".buy_page"), 303)
    try:
        pack = packs()[int(request.form.get("points", ""))]
    except (KeyError, ValueError):
        abort(400, _("Choose one of the packs on this page."))
    site = public_url()
    done = site + url_for(".done") + "?session_id={CHECKOUT_SESSION_ID}"
    try:
        url = checkout.start_checkout(
            current_app.config,
            current_user.id,
            pack,
            name=ngettext(
                "%(num)s point · Hazard Points", "%(num)s points · Hazard Points", pack.points
            ),
            locale=i18n.language(),
            success_url=done,
            cancel_url=site + url_for(".buy_page", cancelled=1),
        )
    except checkout.CheckoutUnavailable:
        flash(_("The payment page could not be opened: nothing was charged. Try again."), "error")
        return redirect(url_for(".buy_page"), 303)
    return redirect(url, 303)


@bp.get("/points/buy/done")
@login_required
def done():
    """The page after paying: the points arrive when Stripe confirms; it waits for that."""
    state = checkout.session_state(request.args.get("session_id", ""), current_user.id)
    if state is None:
        abort(404)
    return render_template("payments/done.html", state=state)


@bp.get("/points/receipts/<session_id>")
@login_required
def receipt(session_id: str):
    """The receipt (領収書) of a credited purchase, in the reader's language."""
    return _receipt("payments/receipt.html", session_id)


@bp.get("/points/receipts/<session_id>/print")
@login_required
def receipt_print(session_id: str):
    """The same receipt alone on the page, for printing or saving as PDF."""
    return _receipt("payments/receipt_print.html", session_id)


def _receipt(template: str, session_id: str):
    paid = receipts.receipt(session_id, current_user.id)
    if paid is None:
        abort(404)  # another user's, never paid, or no such session
    return render_template(
        template,
        paid=paid,
        tax=receipts.tax_included(paid.amount),
        rate=receipts.TAX_RATE_PERCENT,
    )


@bp.get("/points/buy/<session_id>/status")
@login_required
def status(session_id: str):
    """The after-pay page's fragment, polled until the purchase is credited or ends."""
    state = checkout.session_state(session_id, current_user.id)
    if state is None:
        abort(404)
    return render_template("payments/_status.html", state=state)


@bp.post("/payments/stripe/webhook")
@csrf.exempt
def webhook():
    """Verify a Stripe event on its raw body, act on it, answer 200 (400: nothing written)."""
    secret = current_app.config["STRIPE_WEBHOOK_SECRET"]
    if not secret:
        abort(404)
    payload = request.get_data()
    try:
        stripe.WebhookSignature.verify_header(
            payload,
            request.headers.get("Stripe-Signature"),
            secret,
            stripe.Webhook.DEFAULT_TOLERANCE,
        )
    except Exception as exc:
        # Whatever fails is not signed: the library's own errors too (compare_digest
        # raises TypeError on a signature that is not ASCII).
        log.warning("stripe webhook refused: %s", type(exc).__name__)
        return jsonify(error="signature not valid"), 400
    try:
        event = json.loads(payload)
    except (ValueError, RecursionError):  # RecursionError: a body nested 30,000 deep
        event = None
    if not isinstance(event, dict):
        return jsonify(error="not an event"), 400
    outcome = purchases.handle(event, packs())
    return jsonify(received=True, outcome=outcome)


@bp.get("/legal/commerce")
def commerce():
    """特定商取引法に基づく表記: who sells, for how much, when it is delivered, refunds."""
    return render_template("payments/commerce.html", packs=packs().values())


SAMPLE_PLACE = "札幌市"


@bp.get("/sample")
def sample():
    """A sample report to read before paying: the demo pipeline's, marked as a sample."""
    lang = i18n.language()
    kept = current_app.extensions.setdefault("sample_reports", {})
    if lang not in kept:  # made once per language and process: no database, no point
        kept[lang] = run_assessment(
            resolve_place(SAMPLE_PLACE),
            lang,
            # The demo pipeline, without its pauses: the same analysis and words.
            provider=make_provider(
                {**current_app.config, "LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0}
            ),
            cache=SingleFlightCache(maxsize=64, ttl=3600),
            progress=lambda step, percent: None,
        )
    return render_template("payments/sample.html", report=kept[lang])


@bp.get("/legal/terms")
def terms():
    """The terms of the points people buy."""
    return render_template("payments/terms.html", packs=packs().values())


def init_app(app: Flask) -> None:
    """Register the routes; settings that cannot work stop the server, naming them."""
    app.extensions["point_packs"] = checkout.parse_packs(app.config["POINT_PACKS"])
    if is_on(app.config["TEST_SHOP"]) and checkout.live_mode(app.config):
        raise ValueError("TEST_SHOP sells demonstration reports: not with a live Stripe key")
    invoice = app.config["SELLER_INVOICE_NUMBER"]
    if invoice and not re.fullmatch(r"T\d{13}", invoice):
        raise ValueError(f"SELLER_INVOICE_NUMBER must be T and 13 digits, not {invoice!r}")
    if url := app.config["PUBLIC_URL"]:
        parts = urlsplit(url)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
        ):
            raise ValueError(f"PUBLIC_URL must be http(s)://host[:port], not {url!r}")
        if app.config.get("TRUSTED_HOSTS") is None:
            # Flask answers 400 to any other Host; loopback stays for checks on the machine.
            app.config["TRUSTED_HOSTS"] = [parts.hostname, "localhost", "127.0.0.1"]
    app.register_blueprint(bp)
