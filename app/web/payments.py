"""Buying points: the buy page, Stripe Checkout, the page after paying, Stripe's webhook,
and the pages a shop in Japan must show (特定商取引法に基づく表記, terms).

The money logic is app/points/purchases.py; this module verifies, brakes and answers.
"""

import json
import logging

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

from ..extensions import csrf, limiter
from ..points import purchases
from . import i18n
from .headers import CSP, talisman

log = logging.getLogger(__name__)

bp = Blueprint("payments", __name__)

# The buy page's form is answered with a redirect to Stripe's hosted page: the browser
# follows it only if the page's form-action allows Stripe's origin.
CHECKOUT_CSP = {**CSP, "form-action": "'self' https://checkout.stripe.com"}


def packs() -> dict[int, purchases.Pack]:
    return current_app.extensions["point_packs"]


def _on_sale() -> bool:
    return purchases.configured(current_app.config) and bool(packs())


@bp.get("/points/buy")
@login_required
@talisman(content_security_policy=CHECKOUT_CSP)
def buy_page():
    """Show the packs, or say that purchases are not set up and how to get points instead."""
    if request.args.get("cancelled"):
        flash(_("Payment cancelled: nothing was charged."), "info")
    return render_template("payments/buy.html", packs=packs().values(), on_sale=_on_sale())


def _user_key() -> str:
    return f"buy:{current_user.id}"


@bp.post("/points/buy")
@login_required
@limiter.limit(lambda: current_app.config["BUY_RATE_LIMIT"], key_func=_user_key, scope="buy")
def buy():
    """Create a Checkout Session for the chosen pack and send the browser to it (303)."""
    if not _on_sale():
        flash(_("Purchases are not set up here: nothing was charged."), "error")
        return redirect(url_for(".buy_page"), 303)
    try:
        pack = packs()[int(request.form.get("points", ""))]
    except (KeyError, ValueError):
        abort(400, _("Choose one of the packs on this page."))
    done = url_for(".done", _external=True) + "?session_id={CHECKOUT_SESSION_ID}"
    try:
        url = purchases.start_checkout(
            current_app.config,
            current_user.id,
            pack,
            name=ngettext(
                "%(num)s point · Hazard Points", "%(num)s points · Hazard Points", pack.points
            ),
            locale=i18n.language(),
            success_url=done,
            cancel_url=url_for(".buy_page", cancelled=1, _external=True),
        )
    except purchases.CheckoutUnavailable:
        flash(_("The payment page could not be opened: nothing was charged. Try again."), "error")
        return redirect(url_for(".buy_page"), 303)
    return redirect(url, 303)


@bp.get("/points/buy/done")
@login_required
def done():
    """The page after paying: the points arrive when Stripe confirms; it waits for that."""
    state = purchases.session_state(request.args.get("session_id", ""), current_user.id)
    if state is None:
        abort(404)
    return render_template("payments/done.html", state=state)


@bp.get("/points/buy/<session_id>/status")
@login_required
def status(session_id: str):
    """The after-pay page's fragment, polled until the purchase is credited or ends."""
    state = purchases.session_state(session_id, current_user.id)
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
        stripe.Webhook.construct_event(payload, request.headers.get("Stripe-Signature"), secret)
        event = json.loads(payload)
    except (stripe.SignatureVerificationError, ValueError) as exc:
        log.warning("stripe webhook refused: %s", exc)
        return jsonify(error="signature or body not valid"), 400
    if not isinstance(event, dict):
        return jsonify(error="not an event"), 400
    outcome = purchases.handle(event, packs())
    return jsonify(received=True, outcome=outcome)


@bp.get("/legal/commerce")
def commerce():
    """特定商取引法に基づく表記: who sells, for how much, when it is delivered, refunds."""
    return render_template("payments/commerce.html", packs=packs().values())


@bp.get("/legal/terms")
def terms():
    """The terms of the points people buy."""
    return render_template("payments/terms.html", packs=packs().values())


def init_app(app: Flask) -> None:
    """Register the routes; a POINT_PACKS that does not read stops the server, naming it."""
    app.extensions["point_packs"] = purchases.parse_packs(app.config["POINT_PACKS"])
    app.register_blueprint(bp)
