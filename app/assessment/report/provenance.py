"""Where a report's figures come from, with the credit and processing note each source asks.

Shown in the report, its print view and its JSON ("provenance"): one entry per service,
the statutory disclaimer, and the landslide data's conditions for the place's prefecture
(and for every other prefecture whose landslide tiles the extent touches).
"""

from typing import Any

from ..registers import outlines
from ..sources import coverage, portal, terms

DISCLAIMER_JA = (
    "この報告書は、公開データを加工して作成した参考資料です。市町村が作成・公表する法定の"
    "ハザードマップではありません。宅地建物取引の重要事項説明には、市町村のハザードマップを"
    "用いてください。"
)
DISCLAIMER_EN = (
    "This report is reference material processed from public data. It is not the "
    "municipality's hazard map, which is the legal reference: for the 重要事項説明 of a "
    "property transaction use the municipal hazard map."
)
LANDSLIDE_DATASETS = ("debris_flow_zones", "steep_slope_zones", "landslide_zones")
# The credit the catalogue asks for the three landslide datasets, with the portal's 出典.
LANDSLIDE_CREDIT_JA = (
    "出典：ハザードマップポータルサイト、国土交通省国土数値情報ダウンロードサイト"
    "（令和７年度土砂災害警戒区域）。国土交通省政策統括官付地理空間情報課"
    "「国土数値情報（令和７年度土砂災害警戒区域）」をもとに国土地理院が加工"
)
JSHIS_GROUND_REFERENCE = (
    "若松加寿江・松岡昌志 (2013) 全国統一基準による地形・地盤分類250mメッシュマップの構築と"
    "その利用, 地震工学会誌 No.18; 防災科学技術研究所 J-SHIS 表層地盤モデル"
)


COVERAGE_NAMES = {
    "flood": ("洪水", "flood"),
    "flood_planned": ("洪水（計画規模）", "flood (planned scale)"),
    "tsunami": ("津波", "tsunami"),
    "storm_surge": ("高潮", "storm surge"),
    "inland_flood": ("内水", "inland flooding"),
    "house_collapse": ("家屋倒壊等氾濫想定区域", "house-collapse zones"),
    "flood_duration": ("浸水継続時間", "flood duration"),
}
# The flood-type datasets the portal's credit names (depths at both scales, house collapse,
# duration): the portal's datasets but the landslide ones, named and ordered as it names
# them (sources/portal.py).
DEPTH_DATASETS = tuple(name for name in portal.NAMES if name not in LANDSLIDE_DATASETS)


def describe(sources: dict[str, dict[str, Any]], area: Any) -> dict[str, Any]:
    """Return the report's provenance: services, disclaimer and landslide conditions."""
    services = []
    zone_sources = [s for name, s in sources.items() if name.endswith("_zones")]
    if zone_sources:
        real = all(s.get("real") for s in zone_sources)
        depths = [portal.NAMES[name] for name in DEPTH_DATASETS if name in sources]
        depths_ja = "・".join(ja for ja, _ in depths) or "浸水想定"
        depths_en = ", ".join(en for _, en in depths) or "inundation tiles"
        services.append(
            {
                "service_ja": "ハザードマップポータルサイト（国土交通省）",
                "service_en": "Hazard Map Portal Site (MLIT)",
                "url": "https://disaportal.gsi.go.jp/hazardmap/copyright/opendata.html",
                "real": real,
                "credit_ja": (
                    f"出典：ハザードマップポータルサイト（{depths_ja}）のタイルを加工して作成"
                    if real
                    else "デモ用に作成した区域（ポータルの凡例の色で描いたもの）"
                ),
                "credit_en": (
                    f"Source: Hazard Map Portal Site (MLIT), {depths_en}; "
                    "processed (read pixel by pixel over the area)"
                    if real
                    else "Demonstration zones painted in the portal's legend colours"
                ),
                "datasets": sorted({s.get("dataset_id", "") for s in zone_sources} - {""}),
            }
        )
        if any(name in LANDSLIDE_DATASETS for name in sources):
            services.append(
                {
                    "service_ja": "土砂災害警戒区域（ハザードマップポータルサイト）",
                    "service_en": "Sediment-disaster warning zones (Hazard Map Portal Site)",
                    "url": "https://nlftp.mlit.go.jp/ksj/gml/datalist/KsjTmplt-A33-2025.html",
                    "real": real,
                    "credit_ja": LANDSLIDE_CREDIT_JA if real else "デモ用に作成した区域",
                    "credit_en": (
                        LANDSLIDE_CREDIT_JA + " (the credit the data's catalogue entry asks for)"
                        if real
                        else "Demonstration zones painted in the portal's legend colours"
                    ),
                }
            )
    jshis_sources = [sources[name] for name in ("faults", "ground") if name in sources]
    if jshis_sources:
        real = all(s.get("real") for s in jshis_sources)
        services.append(
            {
                "service_ja": "J-SHIS 地震ハザードステーション（防災科学技術研究所）",
                "service_en": "J-SHIS (NIED)",
                "url": "https://www.j-shis.bosai.go.jp/",
                "real": real,
                "credit_ja": (
                    "出典：防災科学技術研究所 J-SHIS 地震ハザードステーション"
                    f"（{'、'.join(s.get('version_ja', '') for s in jshis_sources)}）。"
                    f"地形区分：{JSHIS_GROUND_REFERENCE}。液状化の傾向は地形区分から本サービスが判定"
                    if real
                    else "デモ用の数値（J-SHISではありません）"
                ),
                "credit_en": (
                    "Source: NIED J-SHIS ("
                    + "; ".join(s.get("version_en", "") for s in jshis_sources)
                    + "); landform classes after Wakamatsu and Matsuoka (2013); the "
                    "liquefaction tendency is this service's reading of the landform class"
                    if real
                    else "Demonstration numbers, not J-SHIS"
                ),
            }
        )
    meta = outlines.meta()
    services.append(
        {
            "service_ja": "国土数値情報 行政区域（N03）",
            "service_en": "National Land Numerical Information, administrative areas (N03)",
            "url": "https://nlftp.mlit.go.jp/ksj/",
            "real": True,
            "credit_ja": "出典：" + meta["source"]["credit_ja"] + "（簡略化）",
            "credit_en": meta["source"]["credit_en"] + " (simplified)",
            "version_ja": outline_edition(area)[0],
            "version_en": outline_edition(area)[1],
        }
    )
    services.append(
        {
            "service_ja": "国土地理院",
            "service_en": "Geospatial Information Authority of Japan (GSI)",
            "real": True,
            "credit_ja": "ポータルのタイルは国土地理院のサーバーから配信されます",
            "credit_en": "The portal's tiles are served by GSI (disaportaldata.gsi.go.jp)",
        }
    )
    # What the report says is not published here (or only partly) comes from the portal's
    # catalogue and lists: each page read, with its date, among the sources.
    for said in coverage.sources_for(area):
        ja = "・".join(COVERAGE_NAMES.get(key, (key, key))[0] for key in said["layers"].split(","))
        en = ", ".join(COVERAGE_NAMES.get(key, (key, key))[1] for key in said["layers"].split(","))
        for url in said["source"].split(" ; "):
            services.append(
                {
                    "service_ja": "ハザードマップポータルサイト：公開範囲",
                    "service_en": "Hazard Map Portal Site: what is published where",
                    "url": url,
                    "real": True,
                    "credit_ja": f"{ja}の公開範囲（{said['date']}に確認）",
                    "credit_en": f"coverage of the {en} data (read {said['date']})",
                }
            )
    row = terms.conditions(area)
    touched = []
    if any(name in LANDSLIDE_DATASETS for name in sources):
        # The other prefectures the extent touches: their tiles were read under their own
        # terms (or not read, where those forbid it), so their terms are printed too.
        from ..grid.zones import plan

        touched = [_terms(terms.conditions_of(pref)) for pref in plan(area).prefectures[1:]]
    return {
        "services": services,
        "disclaimer_ja": DISCLAIMER_JA,
        "disclaimer_en": DISCLAIMER_EN,
        "landslide_terms": _terms(row),
        **({"landslide_terms_touched": touched} if touched else {}),
    }


def _terms(row: dict[str, str]) -> dict[str, Any]:
    return {
        "prefecture": row.get("prefecture", ""),
        "commercial_use": row.get("commercial_use", ""),
        "conditions_ja": row.get("conditions_ja", ""),
        "conditions_en": row.get("conditions_en", ""),
        "statement_ja": row.get("statement_ja", ""),
        "statement_links": (row.get("statement_links") or "").split(),
        "source": row.get("source", ""),
    }


def outline_edition(area: Any) -> tuple[str, str]:
    """Return which N03 edition, via which copy, gave the area's outline (Japanese, English)."""
    if getattr(area, "code5", "") in outlines.coarse_codes():
        return (
            "N03-21_210101（2021年1月1日時点、1%に簡素化）、smartnews-smri/japan-topography経由",
            "N03-21_210101 (as of 2021-01-01, simplified to 1 %), "
            "via smartnews-smri/japan-topography",
        )
    return (
        "N03-22_220101（2022年1月1日時点）",
        "N03-22_220101 (as of 2022-01-01), via geolonia/japanese-admins",
    )
