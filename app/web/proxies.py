"""The client's address behind a reverse proxy: X-Forwarded-For, believed from trusted proxies only.

Behind a proxy, REMOTE_ADDR is the proxy's, so every client shared one log-in brake. With
PROXY_FIX_X_FOR=N (the number of proxies in front that append to X-Forwarded-For),
werkzeug's ProxyFix takes the client's address from that header, but only for a request
whose REMOTE_ADDR is one of FORWARDED_ALLOW_IPS (the proxies gunicorn already believes
for X-Forwarded-Proto and SCRIPT_NAME; "*" is anyone, for a proxy on a private network
only). From anyone else the header is the client's own words and is ignored: otherwise
a guesser would name a new address with each guess. Off (0) by default.
"""

import ipaddress
from collections.abc import Callable, Iterable

from werkzeug.middleware.proxy_fix import ProxyFix


def networks(raw: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network] | None:
    """Parse FORWARDED_ALLOW_IPS (addresses or networks, comma-separated); None for "*"."""
    entries = [entry.strip() for entry in raw.split(",") if entry.strip()]
    if "*" in entries:
        return None
    return [ipaddress.ip_network(entry, strict=False) for entry in entries]


class TrustedProxyFix:
    """WSGI middleware: ProxyFix(x_for=N) for requests from the trusted proxies only."""

    def __init__(self, wsgi_app: Callable, x_for: int, allowed: str):
        self.wsgi_app = wsgi_app
        self.fixed = ProxyFix(wsgi_app, x_for=x_for, x_proto=0, x_host=0, x_port=0, x_prefix=0)
        self.allowed = networks(allowed)

    def _trusted(self, address: str | None) -> bool:
        if self.allowed is None:
            return True
        try:
            ip = ipaddress.ip_address(address or "")
        except ValueError:
            return False
        return any(ip in network for network in self.allowed)

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if self._trusted(environ.get("REMOTE_ADDR")):
            return self.fixed(environ, start_response)
        return self.wsgi_app(environ, start_response)


def install(app) -> None:
    """Wrap the app in TrustedProxyFix when PROXY_FIX_X_FOR asks for it."""
    x_for = app.config["PROXY_FIX_X_FOR"]
    if x_for > 0:
        app.wsgi_app = TrustedProxyFix(app.wsgi_app, x_for, app.config["FORWARDED_ALLOW_IPS"])
