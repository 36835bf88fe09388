"""Which data this process serves while LAYER_PROVIDER is unset: each real service asked at
the start and every few minutes, real data when all answer, else the demo, with the reason.

check_real() asks J-SHIS at a point every service covers and the portal for each zone
dataset's sample tile (`flask providers-check` prints it); probe() turns that into real or
demo; choose_provider() makes the provider at the start, recheck() again while the process
runs, and serving() says what it serves, since when and why (the dashboard, the log).
"""

import threading
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ProviderError
from . import evacuation, portal
from .providers import ZONES, LayerProvider, make_provider

# A point every service covers (Tokyo Station): the probe asks J-SHIS about it.
PROBE_POINT = (35.68124, 139.76712)


def check_real(
    provider: Any, timeout: float, sites: bool = True
) -> list[tuple[str, bool, str, str]]:
    """Ask each real service, and the portal once per zone dataset (its sample tile).

    sites: ask GSI's evacuation sites too (its sample tile). The start probe does not: a
    report without them says so, and they never decide which data a process serves.

    Returns (what was asked, available, what was seen, the short reason when it is not)
    per check, in a stable order. A short reason names its service or its dataset first
    ("J-SHIS: unreachable", "flood_zones: the sample tile is missing (HTTP 404)"), so a
    page can word it in the reader's language (app/web/reasons.py).
    """
    import concurrent.futures

    routes = provider.routes
    asks: dict[str, Any] = {"J-SHIS": lambda: routes["faults"].check(*PROBE_POINT)}
    for dataset in ZONES:
        asks[dataset] = lambda dataset=dataset: routes[dataset].sample(dataset)
    evacuation_sites = getattr(routes.get(ZONES[0]), "evacuation", None)
    if sites and evacuation_sites is not None:
        asks["evacuation_sites"] = evacuation_sites.sample
    results = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = {name: pool.submit(ask) for name, ask in asks.items()}
        for name, future in futures.items():
            try:
                answer = future.result(timeout=timeout * 2)
            except ProviderError as exc:
                results.append((name, False, exc.reason, exc.reason))  # it names its service
                continue
            except Exception as exc:  # noqa: BLE001 - a probe reports, never stops the start
                results.append((name, False, f"{name}: {exc!r}", f"{name}: {exc!r}"))
                continue
            if isinstance(answer, dict) and "sites" in answer:  # GSI's evacuation sites
                short = f"{name}: {answer['verdict']}".replace("not available: ", "")
                seen = evacuation.describe_check(answer)
                results.append((name, answer["ok"], seen, "" if answer["ok"] else short))
            elif isinstance(answer, dict) and "verdict" in answer:  # a portal sample
                verdict = answer["verdict"]
                short = verdict if answer["status"] is None else f"{name}: {verdict}"
                short = short.replace("not available: ", "")
                results.append((name, answer["ok"], portal.describe_check(answer), short))
            else:
                results.append((name, True, f"J-SHIS: {answer}", ""))
    return results


def probe(config: Mapping[str, Any], timeout: float) -> tuple[bool, str]:
    """Ask each real service within timeout; return (all available, what was seen).

    The portal is asked for a sample tile known to be painted, per zone dataset: a 404,
    an all-transparent sample or colours not in its legend mean that layer is not
    available, so the demo is served and the reason says which layer and why.
    """
    real = make_provider(
        {
            **config,
            "LAYER_PROVIDER": "real",
            "LAYER_HTTP_RETRIES": 0,
            "LAYER_HTTP_TIMEOUT_SECONDS": timeout,
        }
    )
    results = check_real(real, timeout, sites=False)
    failures = list(
        dict.fromkeys(
            short for name, ok, _, short in results if not ok and name not in portal.SAMPLE_UNSURE
        )
    )
    if failures:
        return False, "; ".join(failures)
    unsure = [short for name, ok, _, short in results if not ok and name in portal.SAMPLE_UNSURE]
    if unsure:  # said, never a reason to drop every real layer
        return True, "J-SHIS and the hazard map portal answered; not confirmed: " + "; ".join(
            unsure
        )
    return True, "J-SHIS and the hazard map portal answered, every layer's sample readable"


# Which data this process serves while LAYER_PROVIDER is unset, since when and why: set
# by the start probe and each recheck, read by serving() (the web layer, the dashboard).
_serving: dict[str, Any] = {"mode": "", "since": None, "reason": ""}
_serving_lock = threading.Lock()
DEFAULT_RECHECK_SECONDS = 300.0


def serving() -> tuple[str, Any, str]:
    """Return (mode, since, reason): "real" or "demo" (or "" before any probe), the UTC
    datetime the process began serving it, and what the last probe saw.
    """
    with _serving_lock:
        return _serving["mode"], _serving["since"], _serving["reason"]


def _note_serving(mode: str, reason: str) -> bool:
    """Record a probe's outcome; return whether the mode changed."""
    from datetime import UTC, datetime

    with _serving_lock:
        changed = mode != _serving["mode"]
        if changed:
            _serving["since"] = datetime.now(UTC)
        _serving["mode"], _serving["reason"] = mode, reason
        return changed


def _probed_choice(config: Mapping[str, Any]) -> tuple[LayerProvider, dict[str, Any]]:
    answered, reason = probe(config, float(config.get("PROVIDER_PROBE_SECONDS") or 3))
    mode = "real" if answered else "demo"
    chosen = make_provider({**config, "LAYER_PROVIDER": mode})
    changed = _note_serving(mode, reason)
    _, since, _ = serving()
    choice = {
        "mode": mode,
        "explicit": False,
        "setting": "",
        "reason": reason,
        "since": since.isoformat(timespec="seconds"),
        "changed": changed,
    }
    return chosen, choice


def recheck(
    config: Mapping[str, Any],
    on_change: Callable[[LayerProvider, dict[str, Any]], None],
    stop: threading.Event,
) -> None:
    """Ask the services again every PROVIDER_RECHECK_SECONDS until stop is set; call
    on_change with the new provider when the mode changes (real when all answer, demo
    when one stops), logging once per change.
    """
    import logging

    log = logging.getLogger(__name__)
    every = float(config.get("PROVIDER_RECHECK_SECONDS") or DEFAULT_RECHECK_SECONDS)
    while not stop.wait(every):
        try:
            provider, choice = _probed_choice(config)
        except Exception:  # noqa: BLE001 - a recheck must never end: try again next time
            log.exception("provider recheck failed")
            continue
        if choice["changed"]:
            log.warning(
                "LAYER_PROVIDER unset: now serving %s data (%s)", choice["mode"], choice["reason"]
            )
            on_change(provider, choice)


def choose_provider(config: Mapping[str, Any]) -> tuple[LayerProvider, dict[str, Any]]:
    """Return the provider to use, and why: an explicit LAYER_PROVIDER always wins.

    Unset, each real service is asked (PROVIDER_PROBE_SECONDS), the portal for each zone
    layer's sample tile: real data when they all answer, else the demo, with the reason
    (shown on the dashboard, the new-assessment page and in the log). recheck() asks again
    every few minutes; serving() says what this process serves, since when and why.
    """
    setting = str(config.get("LAYER_PROVIDER") or "").strip()
    if setting:
        provider = make_provider(config)
        return provider, {
            "mode": "demo" if provider.is_demo else "real",
            "explicit": True,
            "setting": setting,
            "reason": "",
        }
    return _probed_choice(config)
