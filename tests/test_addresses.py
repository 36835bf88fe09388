"""Street addresses: what people type, placed at its 町丁目's point; unknown and ambiguous free.

The table is real ways of writing real addresses (widths, kanji numerals, 丁目/番地/号 and
hyphens, ヶ/ケ/が, 之/ノ/の, spaces, a leading postal code, an old ward's name), each with
the 町丁目 it must be placed at. A new spelling is a row.
"""

import json
from urllib.parse import unquote

import pytest

from app.assessment import PlaceAmbiguous, PlaceNotFound, resolve_place
from app.assessment.place.resolver import query_for
from app.assessment.registers import addresses
from app.assessment.registers.keys import romaji_key, romanise, romanise_name
from app.assessment.sources.gsi_address import _names_banchi, place_address
from tests.conftest import job_id_from, serve_http, signed_in, wait_for
from tests.test_assessment_jobs import nothing_written

TABLE = [
    ("東京都千代田区丸の内1-9-1", "東京都千代田区丸の内一丁目", "9-1"),
    ("東京都千代田区丸の内１－９－１", "東京都千代田区丸の内一丁目", "9-1"),
    ("千代田区丸の内一丁目9番1号", "東京都千代田区丸の内一丁目", "9番1号"),
    ("東京都千代田区丸の内1丁目9番1号", "東京都千代田区丸の内一丁目", "9番1号"),
    ("東京都 千代田区 丸の内 1-9-1", "東京都千代田区丸の内一丁目", "9-1"),
    ("東京都千代田区丸の内 一丁目 ９ー１", "東京都千代田区丸の内一丁目", "9ー1"),
    ("〒100-0005 東京都千代田区丸の内1-9-1", "東京都千代田区丸の内一丁目", "9-1"),
    ("100-0005 千代田区丸の内1丁目9-1", "東京都千代田区丸の内一丁目", "9-1"),
    ("千代田区丸の内一丁目九番一号", "東京都千代田区丸の内一丁目", "九番一号"),
    ("東京都千代田区霞ケ関1-1", "東京都千代田区霞が関一丁目", "1"),
    ("東京都千代田区霞ヶ関2丁目1", "東京都千代田区霞が関二丁目", "1"),
    ("東京都千代田区霞が関3-1-1", "東京都千代田区霞が関三丁目", "1-1"),
    ("東京都千代田区一番町10", "東京都千代田区一番町", "10"),
    ("東京都千代田区九段北1-2-3", "東京都千代田区九段北一丁目", "2-3"),
    ("東京都新宿区西新宿2-8-1", "東京都新宿区西新宿二丁目", "8-1"),
    ("新宿区西新宿二丁目8番1号", "東京都新宿区西新宿二丁目", "8番1号"),
    ("〒160-0023\u3000東京都新宿区西新宿２丁目８−１", "東京都新宿区西新宿二丁目", "8−1"),
    ("東京都港区六本木6-10-1", "東京都港区六本木六丁目", "10-1"),
    ("港区六本木六丁目10番1号", "東京都港区六本木六丁目", "10番1号"),
    ("東京都世田谷区三軒茶屋2-11-1", "東京都世田谷区三軒茶屋二丁目", "11-1"),
    ("東京都渋谷区道玄坂２－２９－１", "東京都渋谷区道玄坂二丁目", "29-1"),
    ("東京都目黒区自由ヶ丘1丁目", "東京都目黒区自由が丘一丁目", ""),
    ("東京都目黒区自由が丘１－１", "東京都目黒区自由が丘一丁目", "1"),
    ("東京都府中市宮西町1丁目", "東京都府中市宮西町一丁目", ""),
    ("北海道札幌市中央区北1条西2丁目", "北海道札幌市中央区北一条西二丁目", ""),
    ("札幌市中央区北一条西二丁目1番地", "北海道札幌市中央区北一条西二丁目", "1番地"),
    ("〒060-0001 札幌市北1条西2丁目", "北海道札幌市中央区北一条西二丁目", ""),  # the city's ward
    ("大阪府大阪市北区梅田3丁目1-1", "大阪府大阪市北区梅田三丁目", "1-1"),
    ("大阪市北区梅田三丁目１番１号", "大阪府大阪市北区梅田三丁目", "1番1号"),
    ("神奈川県横浜市西区みなとみらい2-2-1", "神奈川県横浜市西区みなとみらい二丁目", "2-1"),
    ("横浜市西区みなとみらい２丁目２番１号", "神奈川県横浜市西区みなとみらい二丁目", "2番1号"),
    ("愛知県名古屋市中村区名駅1-1-4", "愛知県名古屋市中村区名駅一丁目", "1-4"),
    ("福岡県福岡市博多区博多駅中央街1-1", "福岡県福岡市博多区博多駅中央街", "1-1"),
    # Kyoto's addresses lead with the streets' names (通 ... 上る).
    ("京都府京都市中京区寺町通御池上る上本能寺前町488", "京都府京都市中京区上本能寺前町", "488"),
    ("長野県長野市篠の井塩崎123", "長野県長野市篠ノ井塩崎", "123"),  # ノ typed の
    ("長野市篠之井塩崎", "長野県長野市篠ノ井塩崎", ""),  # and 之
    ("埼玉県川越市大字笠幡123", "埼玉県川越市大字笠幡", "123"),
    ("埼玉県比企郡川島町平沼1-2", "埼玉県川島町大字平沼", "1-2"),  # the district, 大字 left out
    ("千葉県袖ケ浦市長浦", "千葉県袖ケ浦市長浦", ""),  # 袖ヶ浦 in the address data
    # The data predates Hamamatsu's 2024 wards: an old ward's address goes to the new one.
    ("静岡県浜松市中区元城町103-2", "静岡県浜松市中央区元城町", "103-2"),
    ("静岡県浜松市中央区元城町103-2", "静岡県浜松市中央区元城町", "103-2"),
    ("〒430-0946 元城町1-2", "静岡県浜松市中央区元城町", "1-2"),  # the code's municipality
    ("静岡県浜松市中央区元城103-2", "静岡県浜松市中央区元城町", "103-2"),  # its 町 left off
]


@pytest.mark.parametrize(("typed", "matched", "banchi"), TABLE, ids=[row[0] for row in TABLE])
def test_an_address_is_placed_at_its_chome(typed: str, matched: str, banchi: str) -> None:
    area = resolve_place(typed)
    assert area.address["matched"] == matched
    assert area.address["banchi"] == banchi
    assert area.address["precision"] == "chome"
    assert area.address["input"] == typed.strip()
    street = next(
        e.street
        for e in addresses.streets(area.code5)
        if area.prefecture_ja + area.name_ja + e.street.name == matched
    )
    # At the 町丁目's point, the circle covering it: 500 m unless the 町丁目 is larger.
    assert (area.lat, area.lon) == (round(street.lat, 5), round(street.lon, 5))
    assert area.radius_m == max(500.0, min(street.extent_m, addresses.MAX_RADIUS_M))
    assert area.code == f"{area.code.split('@')[0]}@{area.lat:.5f},{area.lon:.5f}"


def test_numbers_alone_after_a_municipality_name_no_chome() -> None:
    # No street name: the municipality is assessed, as before addresses were placed.
    assert resolve_place("東京都千代田区1-2-3").address is None


def test_a_chome_the_municipality_lacks_is_refused_with_the_closest_names() -> None:
    with pytest.raises(PlaceNotFound) as info:
        resolve_place("東京都千代田区丸の内9丁目1-1")
    assert "東京都千代田区" in str(info.value) and "丸の内9丁目" in str(info.value)
    names = [area.address["matched"] for area in info.value.suggestions]
    assert names[:3] == [f"東京都千代田区丸の内{n}丁目" for n in "一二三"]
    # Each suggestion, chosen, fills the form with words that resolve to it.
    for area in info.value.suggestions:
        assert resolve_place(query_for(area)).address["matched"] == area.address["matched"]


def test_a_street_without_its_chome_offers_each_chome() -> None:
    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place("大阪市北区梅田")
    assert sorted(area.address["matched"] for area in info.value.choices) == [
        f"大阪府大阪市北区梅田{n}丁目" for n in "一三二"
    ]
    assert {area.code5 for area in info.value.choices} == {"27127"}


def test_a_chome_typed_without_its_municipality_offers_the_municipalities_that_have_it():
    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place("三軒茶屋")  # it was "no municipality matches"
    assert [area.address["matched"] for area in info.value.choices] == [
        f"東京都世田谷区三軒茶屋{n}丁目" for n in "一二"
    ]
    with pytest.raises(PlaceNotFound):  # Osaka has no 三軒茶屋
        resolve_place("大阪府三軒茶屋")
    # Found alone, a 町丁目 is always a choice, even one, its 番地 kept: a station or a
    # landmark may share a name with a town far away (三宮, Kobe's, is also 佐渡市's).
    for typed, matched, banchi in [
        ("三軒茶屋2-1-1", "東京都世田谷区三軒茶屋二丁目", "1-1"),
        ("東京都三軒茶屋二丁目", "東京都世田谷区三軒茶屋二丁目", ""),
        ("三軒茶屋二丁目 東京都", "東京都世田谷区三軒茶屋二丁目", ""),  # the prefecture after
        ("Sangenjaya 2-1-1", "東京都世田谷区三軒茶屋二丁目", "1-1"),
        ("Sangenjaya 2chōme", "東京都世田谷区三軒茶屋二丁目", ""),
        ("三宮", "新潟県佐渡市三宮", ""),
    ]:
        with pytest.raises(PlaceAmbiguous) as info:
            resolve_place(typed)
        assert [(a.address["matched"], a.address["banchi"]) for a in info.value.choices] == [
            (matched, banchi)
        ], typed
    # What follows a town's name must be its numbers: 名古屋駅 is no street of a 名古屋.
    for typed in ("名古屋駅", "博多駅"):
        with pytest.raises(PlaceNotFound, match="No municipality matches"):
            resolve_place(typed)
    # A 丁目 the town lacks says so and offers its 丁目, not the whole ward.
    with pytest.raises(PlaceNotFound, match="No 町丁目") as info:
        resolve_place("Sangenjaya 5-1")
    assert len(info.value.suggestions) == 2
    # A name too many municipalities have asks for the municipality, with their number.
    with pytest.raises(PlaceNotFound) as info:
        resolve_place("本町")
    assert "names a 町丁目 (or 大字) in 299 municipalities" in str(info.value)
    with pytest.raises(PlaceNotFound) as info:  # in romaji too
        resolve_place("Honcho 1-chome")
    assert "names a 町丁目 (or 大字) in 120 municipalities" in str(info.value)
    with pytest.raises(PlaceAmbiguous) as info:  # the prefecture narrows it to one
        resolve_place("東京都丸の内")
    assert {area.code5 for area in info.value.choices} == {"13101"}


@pytest.mark.parametrize(("typed", "units"), [("山下町", 25), ("Yamashitacho", 21)])
def test_a_chome_name_more_than_12_municipalities_have_offers_each_municipality_once(
    app, typed, units
) -> None:
    """山下町 (25 municipalities) was "add its municipality", with nothing to choose."""
    from app.web.i18n import place_label

    with pytest.raises(PlaceAmbiguous, match=f"in {units} municipalities: choose one") as info:
        resolve_place(typed)
    choices = info.value.choices
    assert len({area.code5 for area in choices}) == len(choices) == units
    by_name = {area.address["matched"]: area for area in choices}
    # A municipality with one 町丁目 of the name offers it; one with several 丁目 offers
    # the town, whose 丁目 it asks once chosen: each choice resolves back to what it says.
    assert by_name["神奈川県横浜市中区山下町"].address["precision"] == "chome"
    kitami = by_name["北海道北見市山下町"]
    assert kitami.address["precision"] == "town"
    for area in choices:
        try:
            assert resolve_place(query_for(area)).address["matched"] == area.address["matched"]
        except PlaceAmbiguous as asked:  # its 丁目, in that municipality only
            assert area.address["precision"] == "town"
            assert {chome.code5 for chome in asked.choices} == {area.code5}
    # A town is only ever a question: picked by its point, it asks its 丁目.
    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place(f"{typed} ({kitami.lat:.5f},{kitami.lon:.5f})")
    assert {a.code5 for a in info.value.choices} == {kitami.code5}
    assert all(a.address["precision"] == "chome" for a in info.value.choices)
    with app.test_request_context(headers={"Accept-Language": "en"}):
        assert place_label(kitami) == "Yamashitacho (山下町), Kitami, Hokkaido"


@pytest.mark.parametrize(
    ("typed", "matched", "banchi"),
    [
        ("Sangenjaya 2-chome, Setagaya", "東京都世田谷区三軒茶屋二丁目", ""),
        ("Sangenjaya 2-1-1, Setagaya-ku, Tokyo", "東京都世田谷区三軒茶屋二丁目", "1-1"),
        ("1-9-1 Marunouchi, Chiyoda-ku, Tokyo", "東京都千代田区丸の内一丁目", "9-1"),
        ("Marunouchi 1-chome 9-1, Chiyoda", "東京都千代田区丸の内一丁目", "9-1"),
        ("Umeda 1-chōme, Kita-ku, Osaka", "大阪府大阪市北区梅田一丁目", ""),
        ("Sangenjaya 2chome, Setagaya-ku", "東京都世田谷区三軒茶屋二丁目", ""),
    ],
)
def test_a_street_in_romaji_is_placed_by_its_town_s_reading(typed, matched, banchi) -> None:
    area = resolve_place(typed)
    assert (area.address["matched"], area.address["banchi"]) == (matched, banchi)


def test_a_street_in_romaji_without_its_chome_offers_each_and_english_names_them(app) -> None:
    from app.web.i18n import place_label

    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place("Marunouchi, Chiyoda")
    choices = sorted(info.value.choices, key=lambda area: area.address["matched"])
    assert [area.address["matched"] for area in choices] == [
        f"東京都千代田区丸の内{n}丁目" for n in "一三二"
    ]
    with app.test_request_context(headers={"Accept-Language": "en"}):
        # Romaji from Japan Post's reading, long vowels folded as municipalities' are, but
        # not across a word: 丸の内 is まる・の・うち.
        assert place_label(choices[0]) == "Marunouchi 1-chome (丸の内一丁目), Chiyoda-ku, Tokyo"


@pytest.mark.parametrize(
    ("kana", "name", "romaji"),
    [
        ("まるのうち", "丸の内一丁目", "marunouchi"),  # の + 内: a word, no long vowel
        ("おおうら", "大浦", "oura"),
        ("ちよのうら", "千代ノ浦", "chiyonoura"),
        ("こうち", "河内", "kochi"),  # 河 is こう: the う is its long vowel
        ("ものうちょうじょうない", "桃生町城内", "monochojonai"),  # 城内 is じょうない
        ("ほりのうち", "堀之内", "horinouchi"),
        ("おおてまち", "大手町一丁目", "otemachi"),  # long vowels still folded
        ("とうきょう", "東京", "tokyo"),
        ("かみこうとうえん", "上甲東園三丁目", "kamikotoen"),  # 上 first: かみ, not うえ
    ],
)
def test_a_town_s_english_keeps_a_word_that_starts_with_u(kana, name, romaji) -> None:
    assert romanise_name(kana, name) == romaji
    assert romaji_key(romaji) == romaji_key(romanise(kana))  # typed either way, found alike


def test_sapporo_s_jo_in_romaji_is_said_unread_not_read_wrong() -> None:
    # Japan Post reads 北1条西 with its number (きた1じょうにし): typed numbers in romaji are
    # the 丁目 and 番地, so such a town is not read in romaji (it offered 北1-5条西 with
    # 番地 "1"); the street is said unread, before anything is charged.
    from app.assessment.place.resolver import unread

    typed = "Kita 1-jo Nishi 2-chome, Chuo-ku, Sapporo"
    assert resolve_place(typed).code == "011011"
    assert unread(typed) == "Kita 1-jo Nishi 2-chome"


def test_the_town_index_is_the_one_the_streets_make():
    # scripts/build_addresses.py writes both; an archive rebuilt without it fails here.
    with addresses._archive() as archive:
        names = archive.namelist()
        streets = {n[:5]: archive.read(n).decode() for n in names if n[5:] == ".tsv"}
        stored = {n: archive.read(n).decode() for n in names if n.startswith("towns/")}
    assert stored == addresses.town_index(streets)


# Municipalities whose data held names a choice could not come back from (151 of the
# 189,974 町丁目): Kyoto's variant spellings (蓮ケ谷町 and 蓮ヶ谷町, 燈篭 and 燈籠) and towns
# named 四丁目 alone, 黒石市's 大字黒石 beside 黒石 (大仙市, 酒田市 alike), 浜松市's towns
# listed under two units at one point, 喜多方市's 字一丁目, 花巻市's 十二丁目, 若林区's
# 六丁目, 鷹栖町's （大字なし）.
ROUND_TRIP = [f"261{ward:02d}" for ward in range(1, 12)] + [
    "22138", "22139", "22140", "02204", "07208", "01452", "03205", "04103", "05212", "06204"
]  # fmt: skip


@pytest.mark.parametrize("code5", ROUND_TRIP)
def test_every_chome_offered_as_a_choice_resolves_back_to_itself(code5: str) -> None:
    from app.assessment.place.streets import street_area

    assert addresses.streets(code5), code5
    for entry in addresses.streets(code5):
        offered = street_area(entry.street, "", "")
        back = resolve_place(query_for(offered))
        assert (back.lat, back.lon) == (offered.lat, offered.lon), query_for(offered)
        assert back.address["matched"] == offered.address["matched"]


def test_a_point_is_named_by_the_chome_it_lies_in() -> None:
    area = resolve_place("35.68120, 139.76710")
    assert area.address["precision"] == "point"
    assert area.address["matched"] == "東京都千代田区丸の内一丁目"
    assert (area.code, area.radius_m) == ("131016@35.68120,139.76710", 500.0)
    assert query_for(area) == "35.68120,139.76710"


def test_the_shipped_data_says_its_source_and_covers_every_municipality() -> None:
    from app.assessment.place.gazetteer import gazetteer

    meta = addresses.meta()
    assert meta["licence"].startswith("CC BY 4.0") and "Geolonia" in meta["credit_ja"]
    assert meta["snapshot"] == "2024-01-15" and len(meta["commit"]) == 40
    assert meta["entries"] > 189_000 and meta["unmatched"] == []
    # The changes since the snapshot: Hamamatsu's seven old wards, moved to the new three.
    assert sorted(meta["moved_by_changes"]) == [f"2213{n}" for n in range(1, 8)]
    gaz = gazetteer()
    wards = {area.code5[:4] for area in gaz.areas if gaz.is_ward(area)}
    cities = {a.code5 for a in gaz.areas if not gaz.is_ward(a) and a.code5[:4] in wards}
    with addresses._archive() as archive:
        shipped = {name.removesuffix(".tsv") for name in archive.namelist()}
    # 利島村 (13362) has no 町丁目: its addresses are 番地 alone (利島村248).
    missing = {a.name_ja for a in gaz.areas if a.code5 not in shipped | cities | {"13362"}}
    assert missing == set()


# GSI's address search answers a JSON array of GeoJSON Point features, each with
# properties.title (the address found) and geometry.coordinates [lon, lat]. The answers
# below are constructed to that format (as GSI's own 地理院地図 search and public clients
# read it: https://msearch.gsi.go.jp/address-search/AddressSearch?q=...), not recorded.
class GsiStandIn:
    def __init__(self) -> None:
        self.status = 200
        self.features: list = []
        self.asked: list[str] = []
        self.url = ""

    def respond(self, path: str):
        self.asked.append(path)
        return self.status, json.dumps(self.features).encode(), {}


def feature(title: str, lat: float, lon: float) -> dict:
    return {
        "geometry": {"coordinates": [lon, lat], "type": "Point"},
        "type": "Feature",
        "properties": {"addressCode": "", "title": title},
    }


@pytest.fixture
def gsi():
    with serve_http(GsiStandIn()) as stand_in:
        yield stand_in


def test_gsi_places_an_address_to_its_banchi_when_it_answers(gsi) -> None:
    area = resolve_place("東京都千代田区丸の内1-9-1")
    gsi.features = [feature("東京都千代田区丸の内一丁目9", 35.68123, 139.76712)]
    placed = place_address(area, gsi.url + "/AddressSearch")
    assert (placed.lat, placed.lon, placed.radius_m) == (35.68123, 139.76712, 500.0)
    assert placed.address["precision"] == "banchi" and placed.address["source"] == "gsi"
    assert placed.code == "131016@35.68123,139.76712"
    asked = [unquote(path) for path in gsi.asked]
    assert asked == ["/AddressSearch?q=東京都千代田区丸の内一丁目9-1"]


@pytest.mark.parametrize(
    ("status", "features", "why"),
    [
        (200, [feature("東京都千代田区丸の内一丁目", 35.68156, 139.7672)], "no match"),  # no 番地
        (200, [feature("東京都千代田区丸の内一丁目9", 35.0, 135.0)], "no match"),  # far away
        (200, [], "no match"),
        (503, [], "unreachable"),
    ],
)
def test_gsi_falls_back_to_the_chome_and_says_why(gsi, status, features, why) -> None:
    area = resolve_place("東京都千代田区丸の内1-9-1")
    gsi.status, gsi.features = status, features
    placed = place_address(area, gsi.url + "/AddressSearch")
    assert (placed.lat, placed.lon, placed.address["precision"]) == (area.lat, area.lon, "chome")
    assert placed.address["gsi"] == why


# Typed 1 must not accept 12 (nor 9 accept 91): the 番地 after the 町丁目 is one number.
@pytest.mark.parametrize(
    ("title", "banchi", "named"),
    [
        ("東京都千代田区丸の内一丁目9", "9-1", True),
        ("東京都千代田区丸の内一丁目9-1", "9-1", True),
        ("東京都千代田区丸の内一丁目9番", "9", True),
        ("東京都千代田区丸の内一丁目12", "1", False),
        ("東京都千代田区丸の内一丁目91", "9-1", False),
        ("東京都千代田区丸の内一丁目", "9-1", False),
        ("東京都千代田区丸の内二丁目9", "9-1", False),
    ],
)
def test_gsi_title_names_exactly_the_banchi_typed(title, banchi, named) -> None:
    address = {"matched": "東京都千代田区丸の内一丁目", "banchi": banchi}
    assert _names_banchi(title, address) is named


@pytest.mark.parametrize("query", ["東京都千代田区丸の内9丁目", "大阪市北区梅田", "三軒茶屋"])
def test_an_unknown_or_ambiguous_street_charges_nothing(client, actions, sql, query):
    actions.signup()
    response = actions.submit(query, "ja")
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "丁目" in body and 'class="choice-list"' in body
    assert nothing_written(sql)


def test_an_address_report_is_headed_by_its_spot(make_app, gsi, upstream, sql):
    # The real providers' path: the http provider's stand-in, and GSI's placing the 番地.
    gsi.features = [feature("東京都千代田区丸の内一丁目9", 35.68123, 139.76712)]
    app, client, actions = signed_in(
        make_app,
        LAYER_PROVIDER="http",
        LAYER_HTTP_BASE_URL=upstream.url,
        GSI_ADDRESS_SEARCH_URL=gsi.url + "/AddressSearch",
    )
    job_id = job_id_from(actions.submit("東京都千代田区丸の内1-9-1", "ja"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "東京都千代田区丸の内一丁目付近（半径500m）" in page
    assert "入力：" in page and "東京都千代田区丸の内1-9-1" in page
    assert "国土地理院の住所検索で番地まで配置しました" in page
    assert "<code>131016</code>" in page and "131016@" not in page.split("report-facts")[1][:400]
    assert "Geolonia 住所データ" in page
    report = client.get(f"/assessments/{job_id}/report.json").get_json()
    area = report["area"]
    assert (area["lat"], area["lon"], area["radius_m"]) == (35.68123, 139.76712, 500.0)
    assert {k: area["address"][k] for k in ("input", "matched", "precision")} == {
        "input": "東京都千代田区丸の内1-9-1",
        "matched": "東京都千代田区丸の内一丁目",
        "precision": "banchi",
    }
    history = client.get("/assessments").get_data(as_text=True)
    assert "data-typed" in history and "東京都千代田区丸の内1-9-1" in history


def test_a_chome_report_says_it_is_not_placed_to_the_banchi(client, actions, sql, app):
    actions.signup()
    job_id = job_id_from(actions.submit("千代田区丸の内一丁目9番1号", "ja"))
    assert app.extensions["runner"].wait(10)
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "町丁目の代表点に配置しました（番地までは特定していません）" in page
    assert sql("SELECT area->'address'->>'precision' FROM assessment_jobs") == [("chome",)]


def test_a_repeat_warning_compares_spots_by_distance(client, actions, sql, app):
    actions.signup()
    job_id_from(actions.submit("千代田区丸の内1-9-1", "ja"))
    assert app.extensions["runner"].wait(10)
    # 40 m from the 町丁目's point: the same spot, whatever was typed.
    again = actions.submit("35.68190, 139.76720", "ja")
    assert again.status_code == 409 and "丸の内一丁目" in again.get_data(as_text=True)
    # Another spot in the same ward is another report.
    elsewhere = actions.submit("東京都千代田区霞が関1-1", "ja")
    assert elsewhere.status_code == 303
    # The municipality itself is not a spot.
    assert app.extensions["runner"].wait(10)
    assert actions.submit("千代田区", "ja").status_code == 303


@pytest.mark.parametrize(
    ("typed", "offered"),
    [
        ("Sangenchaya 2-chome, Setagaya", ["東京都世田谷区三軒茶屋二丁目"]),
        ("Sangenchaya, Setagaya", ["東京都世田谷区三軒茶屋一丁目", "東京都世田谷区三軒茶屋二丁目"]),
        ("Minami, Yokohama-shi", []),  # another name (南太田), not a slip of it
        ("Zzyzx 2-chome, Setagaya", []),
    ],
)
def test_a_misspelt_street_is_offered_the_nearest_chome_and_only_those(typed, offered) -> None:
    from app.assessment.place.resolver import near

    assert sorted(area.address["matched"] for area in near(typed)) == offered
