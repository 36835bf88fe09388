"""Words for the keys and reasons the assessment stores: datasets, providers, failures.

Rows and reports keep codes ("elevation", "gsi", "GSI elevation API: unreachable"); a
reader sees words in their language. A reason we have no words for is said in general
terms in Japanese rather than shown in English.
"""

import re

from ..assessment.sources import evacuation, portal

# Each dataset and provider key, (English, Japanese).
DATASETS = {
    "elevation": ("elevation", "標高"),
    "rainfall": ("rainfall", "降雨"),
    "coast": ("coastline", "海岸線"),
    "ground": ("ground", "地盤"),
    "faults": ("faults and shaking", "活断層と揺れ"),
    # The zone datasets by the portal's own names, as the report's credits give them.
    **{key: (en, ja) for key, (ja, en) in portal.NAMES.items()},
}
PROVIDERS = {
    "demo": ("the demonstration provider", "デモ用データ"),
    "gsi": ("GSI (Geospatial Information Authority of Japan)", "国土地理院"),
    "jshis": ("J-SHIS (NIED)", "防災科学技術研究所（J-SHIS）"),
    "http": ("an external service", "外部のサービス"),
}
SERVICES = {
    "GSI elevation API": "国土地理院の標高API",
    "J-SHIS": "防災科学技術研究所（J-SHIS）",
    "hazard map portal": "ハザードマップポータルサイト",
}

# Reasons with a figure in them, and their Japanese; the rest are looked up whole.
PATTERNS = (
    (re.compile(r"no answer within (?P<n>[\d.]+) s"), "{n}秒以内に応答がありませんでした"),
    (
        re.compile(r"the service is unavailable \(HTTP (?P<n>\d+)\)"),
        "サービスが停止中です（HTTP {n}）",
    ),
    (
        re.compile(r"the service asked us to slow down \(HTTP 429\)"),
        "サービスから間隔を空けるよう求められました（HTTP 429）",
    ),
    (re.compile(r"the server answered HTTP (?P<n>\d+)"), "サーバーがHTTP {n}を返しました"),
    (
        re.compile(r"the service has no data at any of the (?P<n>\d+) places asked"),
        "問い合わせた{n}地点のいずれにもデータがありませんでした",
    ),
)
WHOLE = {
    "unreachable": "接続できませんでした",
    "the connection failed": "接続に失敗しました",
    "the answer is not valid JSON": "応答を読み取れませんでした",
    "the answer is not a JSON object": "応答を読み取れませんでした",
    "no such dataset": "該当するデータがありません",
    # What the probe says of a zone layer's sample tile.
    "the sample tile is missing (HTTP 404)": "見本のタイルがありません（HTTP 404）",
    "the sample tile is all transparent": "見本のタイルに色が塗られていません",
    "colours not in the published legend": "公表された凡例にない色で塗られています",
    "the sample is not a readable PNG tile": "見本のタイルを読み取れません",
}
GENERAL_JA = "応答の内容を読み取れませんでした"


def dataset_name(key: str, lang: str) -> str:
    """Name a dataset key in lang (an unknown key, as it is)."""
    names = DATASETS.get(key)
    return names[lang == "ja"] if names else key


def hazard_name(code: int, lang: str) -> str:
    """Name a hazard type an evacuation site is designated for (its code in GSI's data)."""
    return evacuation.HAZARDS[code][lang != "ja"]


def provider_names(name: str, lang: str) -> list[str]:
    """Name the providers behind a report's provider ("demo", or "coast=demo,elevation=gsi")."""
    keys = [part.rpartition("=")[2] for part in name.split(",")] if name else []
    named = [PROVIDERS[key][lang == "ja"] if key in PROVIDERS else key for key in keys]
    return list(dict.fromkeys(named))


def reason_ja(reason: str) -> str:
    """Word a failure's reason ("J-SHIS: unreachable") in Japanese, never in English."""
    service, sep, rest = reason.partition(": ")
    if sep and service in SERVICES:
        return f"{SERVICES[service]}：{reason_ja(rest)}"
    if sep and service in DATASETS:  # a zone layer's sample tile
        return f"{DATASETS[service][1]}：{reason_ja(rest)}"
    if reason in WHOLE:
        return WHOLE[reason]
    for pattern, words in PATTERNS:
        if match := pattern.fullmatch(reason):
            return words.format(**match.groupdict())
    return GENERAL_JA


def probe_reason(reason: str, lang: str) -> str:
    """Word the provider probe's reasons ("J-SHIS: unreachable; ...") in lang."""
    if lang != "ja" or not reason:
        return reason
    return "、".join(reason_ja(part) for part in reason.split("; "))
