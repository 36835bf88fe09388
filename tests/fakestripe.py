"""A local stand-in for Stripe's API, and Stripe events signed as Stripe signs them.

How these were made: CONSTRUCTED to the documented format, from Stripe's API reference
(https://docs.stripe.com/api/checkout/sessions/object, .../api/charges/object,
.../api/refunds/object, .../api/disputes/object, .../api/events/object) and its webhook
signature scheme (https://docs.stripe.com/webhooks#verify-manually: header `t=<unix
time>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" keyed with the endpoint secret>`). Nothing here was
recorded from Stripe: the objects carry the fields the app reads, with the documented
names, types and values, and a few more for shape; the rest of Stripe's fields are left
out.
"""

import hashlib
import hmac
import json
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeStripe:
    """A real HTTP server on 127.0.0.1 answering POST /v1/checkout/sessions."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []  # each create's decoded form fields
        self.status = 200
        self.url = ""
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> "FakeStripe":
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                fields = {k: v[0] for k, v in form.items()}
                fields["_authorization"] = self.headers.get("Authorization", "")
                fields["_path"] = self.path
                state.requests.append(fields)
                if state.status != 200 or self.path != "/v1/checkout/sessions":
                    body = {"error": {"type": "api_error", "message": "constructed failure"}}
                    status = state.status if state.status != 200 else 404
                else:
                    body, status = checkout_session(fields), 200
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Request-Id", f"req_{uuid.uuid4().hex[:14]}")
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()


def checkout_session(fields: dict[str, str]) -> dict[str, Any]:
    """A Checkout Session object as the create call answers it (status open, unpaid)."""
    session_id = f"cs_test_{uuid.uuid4().hex}"
    metadata = {k[len("metadata[") : -1]: v for k, v in fields.items() if k.startswith("metadata[")}
    return {
        "id": session_id,
        "object": "checkout.session",
        "amount_subtotal": int(fields["line_items[0][price_data][unit_amount]"]),
        "amount_total": int(fields["line_items[0][price_data][unit_amount]"]),
        "cancel_url": fields.get("cancel_url"),
        "client_reference_id": fields.get("client_reference_id"),
        "created": int(time.time()),
        "currency": fields["line_items[0][price_data][currency]"],
        "expires_at": int(time.time()) + 86400,
        "livemode": False,
        "locale": fields.get("locale"),
        "metadata": metadata,
        "mode": fields.get("mode"),
        "payment_intent": None,
        "payment_status": "unpaid",
        "status": "open",
        "success_url": fields.get("success_url"),
        "url": f"https://checkout.stripe.com/c/pay/{session_id}",
    }


def completed_session(
    session_id: str,
    user_id: int,
    points: int,
    amount: int,
    *,
    currency: str = "jpy",
    payment_status: str = "paid",
    payment_intent: str | None = None,
) -> dict[str, Any]:
    """A Checkout Session object as a checkout.session.* event carries it."""
    return {
        "id": session_id,
        "object": "checkout.session",
        "amount_subtotal": amount,
        "amount_total": amount,
        "client_reference_id": str(user_id),
        "created": int(time.time()),
        "currency": currency,
        "livemode": False,
        "metadata": {"user_id": str(user_id), "points": str(points)},
        "mode": "payment",
        "payment_intent": payment_intent or f"pi_{session_id[-20:]}",
        "payment_status": payment_status,
        "status": "complete",
    }


def refunded_charge(
    payment_intent: str,
    amount: int,
    *,
    refunded_amount: int | None = None,
    charge_id: str | None = None,
) -> dict[str, Any]:
    """A Charge object as charge.refunded carries it (fully refunded unless told).

    amount_refunded is the sum of the charge's refunds that have not failed, so far.
    """
    refunded_amount = amount if refunded_amount is None else refunded_amount
    return {
        "id": charge_id or f"ch_{uuid.uuid4().hex[:24]}",
        "object": "charge",
        "amount": amount,
        "amount_captured": amount,
        "amount_refunded": refunded_amount,
        "currency": "jpy",
        "livemode": False,
        "paid": True,
        "payment_intent": payment_intent,
        "refunded": refunded_amount == amount,
        "status": "succeeded",
    }


def refund(
    payment_intent: str,
    amount: int,
    status: str,
    *,
    refund_id: str | None = None,
    created: int | None = None,
) -> dict[str, Any]:
    """A Refund object as refund.failed and charge.refund.updated carry it.

    A konbini refund waits for the customer's bank details (`requires_action`) and can
    end `failed` or `canceled` (https://docs.stripe.com/payments/konbini/accept-a-payment
    #refunds); the charge's amount_refunded then drops by its amount. It was made
    (`created`) before the events that report it: an hour ago unless told.
    """
    return {
        "id": refund_id or f"re_{uuid.uuid4().hex[:24]}",
        "object": "refund",
        "amount": amount,
        "charge": f"ch_{payment_intent[-20:]}",
        "created": int(time.time()) - 3600 if created is None else created,
        "currency": "jpy",
        "failure_reason": "lost_or_stolen_card" if status == "failed" else None,
        "payment_intent": payment_intent,
        "status": status,
    }


def dispute(payment_intent: str, amount: int, *, dispute_id: str | None = None) -> dict[str, Any]:
    """A Dispute object as charge.dispute.created carries it (a chargeback: the bank took it)."""
    return {
        "id": dispute_id or f"dp_{uuid.uuid4().hex[:24]}",
        "object": "dispute",
        "amount": amount,
        "charge": f"ch_{payment_intent[-20:]}",
        "created": int(time.time()),
        "currency": "jpy",
        "livemode": False,
        "payment_intent": payment_intent,
        "reason": "fraudulent",
        "status": "needs_response",
    }


def event(
    kind: str, obj: dict[str, Any], event_id: str | None = None, created: int | None = None
) -> bytes:
    """An Event object's JSON, as Stripe posts it to a webhook endpoint."""
    return json.dumps(
        {
            "id": event_id or f"evt_{uuid.uuid4().hex[:24]}",
            "object": "event",
            "api_version": "2025-01-27.acacia",
            "created": int(time.time()) if created is None else created,
            "data": {"object": obj},
            "livemode": False,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": kind,
        }
    ).encode()


def signature(payload: bytes, secret: str, timestamp: int | None = None) -> str:
    """The Stripe-Signature header for a payload, signed with the endpoint's secret."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"
