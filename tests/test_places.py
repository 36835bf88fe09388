"""Resolving what a user typed into one municipality, in every script and form."""

import json
import threading
import time

import pytest

from app.assessment.place import gazetteer as gazetteer_module
from app.assessment.place.area import Area, tile_of, tiles_around
from app.assessment.place.gazetteer import gazetteer
from app.assessment.place.resolver import PlaceAmbiguous, PlaceNotFound, resolve_place

# Each prefecture's seat of government: code with check digit, name, reading, romaji.
CAPITALS = [
    ("011002", "札幌市", "さっぽろし", "Sapporo-shi", "北海道", "Hokkaido"),
    ("022012", "青森市", "あおもりし", "Aomori-shi", "青森県", "Aomori"),
    ("032018", "盛岡市", "もりおかし", "Morioka-shi", "岩手県", "Iwate"),
    ("041009", "仙台市", "せんだいし", "Sendai-shi", "宮城県", "Miyagi"),
    ("052019", "秋田市", "あきたし", "Akita-shi", "秋田県", "Akita"),
    ("062014", "山形市", "やまがたし", "Yamagata-shi", "山形県", "Yamagata"),
    ("072010", "福島市", "ふくしまし", "Fukushima-shi", "福島県", "Fukushima"),
    ("082015", "水戸市", "みとし", "Mito-shi", "茨城県", "Ibaraki"),
    ("092011", "宇都宮市", "うつのみやし", "Utsunomiya-shi", "栃木県", "Tochigi"),
    ("102016", "前橋市", "まえばしし", "Maebashi-shi", "群馬県", "Gunma"),
    ("111007", "さいたま市", "さいたまし", "Saitama-shi", "埼玉県", "Saitama"),
    ("121002", "千葉市", "ちばし", "Chiba-shi", "千葉県", "Chiba"),
    ("131041", "新宿区", "しんじゅくく", "Shinjuku-ku", "東京都", "Tokyo"),
    ("141003", "横浜市", "よこはまし", "Yokohama-shi", "神奈川県", "Kanagawa"),
    ("151009", "新潟市", "にいがたし", "Niigata-shi", "新潟県", "Niigata"),
    ("162019", "富山市", "とやまし", "Toyama-shi", "富山県", "Toyama"),
    ("172014", "金沢市", "かなざわし", "Kanazawa-shi", "石川県", "Ishikawa"),
    ("182010", "福井市", "ふくいし", "Fukui-shi", "福井県", "Fukui"),
    ("192015", "甲府市", "こうふし", "Kofu-shi", "山梨県", "Yamanashi"),
    ("202011", "長野市", "ながのし", "Nagano-shi", "長野県", "Nagano"),
    ("212016", "岐阜市", "ぎふし", "Gifu-shi", "岐阜県", "Gifu"),
    ("221007", "静岡市", "しずおかし", "Shizuoka-shi", "静岡県", "Shizuoka"),
    ("231002", "名古屋市", "なごやし", "Nagoya-shi", "愛知県", "Aichi"),
    ("242012", "津市", "つし", "Tsu-shi", "三重県", "Mie"),
    ("252018", "大津市", "おおつし", "Otsu-shi", "滋賀県", "Shiga"),
    ("261009", "京都市", "きょうとし", "Kyoto-shi", "京都府", "Kyoto"),
    ("271004", "大阪市", "おおさかし", "Osaka-shi", "大阪府", "Osaka"),
    ("281000", "神戸市", "こうべし", "Kobe-shi", "兵庫県", "Hyogo"),
    ("292010", "奈良市", "ならし", "Nara-shi", "奈良県", "Nara"),
    ("302015", "和歌山市", "わかやまし", "Wakayama-shi", "和歌山県", "Wakayama"),
    ("312011", "鳥取市", "とっとりし", "Tottori-shi", "鳥取県", "Tottori"),
    ("322016", "松江市", "まつえし", "Matsue-shi", "島根県", "Shimane"),
    ("331007", "岡山市", "おかやまし", "Okayama-shi", "岡山県", "Okayama"),
    ("341002", "広島市", "ひろしまし", "Hiroshima-shi", "広島県", "Hiroshima"),
    ("352039", "山口市", "やまぐちし", "Yamaguchi-shi", "山口県", "Yamaguchi"),
    ("362018", "徳島市", "とくしまし", "Tokushima-shi", "徳島県", "Tokushima"),
    ("372013", "高松市", "たかまつし", "Takamatsu-shi", "香川県", "Kagawa"),
    ("382019", "松山市", "まつやまし", "Matsuyama-shi", "愛媛県", "Ehime"),
    ("392014", "高知市", "こうちし", "Kochi-shi", "高知県", "Kochi"),
    ("401307", "福岡市", "ふくおかし", "Fukuoka-shi", "福岡県", "Fukuoka"),
    ("412015", "佐賀市", "さがし", "Saga-shi", "佐賀県", "Saga"),
    ("422011", "長崎市", "ながさきし", "Nagasaki-shi", "長崎県", "Nagasaki"),
    ("431001", "熊本市", "くまもとし", "Kumamoto-shi", "熊本県", "Kumamoto"),
    ("442011", "大分市", "おおいたし", "Oita-shi", "大分県", "Oita"),
    ("452017", "宮崎市", "みやざきし", "Miyazaki-shi", "宮崎県", "Miyazaki"),
    ("462012", "鹿児島市", "かごしまし", "Kagoshima-shi", "鹿児島県", "Kagoshima"),
    ("472018", "那覇市", "なはし", "Naha-shi", "沖縄県", "Okinawa"),
]

# Forms that other municipalities share: 山県市 (Gifu) is also read やまがたし, Yamagata-shi.
SHARED = {("062014", "kana"), ("062014", "katakana"), ("062014", "romaji")}
SHARED |= {("062014", "romaji_base"), ("062014", "romaji_lower")}


def to_katakana(hiragana: str) -> str:
    return "".join(chr(ord(ch) + 0x60) if "ぁ" <= ch <= "ゖ" else ch for ch in hiragana)


def capital_forms(code, name, kana, romaji, pref_ja, pref_en):
    base = romaji.rsplit("-", 1)[0]
    return {
        "code": code,
        "code5": code[:5],
        "name": name,
        "name_without_suffix": name[:-1],
        "kana": kana,
        "katakana": to_katakana(kana),
        "romaji": romaji,
        "romaji_base": base,
        "romaji_lower": romaji.lower().replace("-", " "),
        "with_prefecture": pref_ja + name,
        "romaji_with_prefecture": f"{romaji}, {pref_en}",
        "address": f"{pref_ja}{name}1丁目2-3",
    }


def test_the_capitals_cover_all_47_prefectures() -> None:
    assert len({row[0][:2] for row in CAPITALS}) == 47


@pytest.mark.parametrize("row", CAPITALS, ids=[row[3] for row in CAPITALS])
def test_every_capital_resolves_from_every_form(row: tuple[str, ...]) -> None:
    code, name, kana, romaji, pref_ja, pref_en = row
    for form, query in capital_forms(*row).items():
        if (code, form) in SHARED:
            with pytest.raises(PlaceAmbiguous) as info:
                resolve_place(query)
            assert code in [area.code for area in info.value.choices]
            continue
        area = resolve_place(query)
        assert area.code == code, f"{form}: {query!r} gave {area.name_ja}"
    area = resolve_place(code)
    assert (area.code5, area.name_ja, area.name_kana) == (code[:5], name, kana)
    assert (area.name_romaji, area.prefecture_ja, area.prefecture_romaji) == (
        romaji,
        pref_ja,
        pref_en,
    )


def test_every_municipality_resolves_with_its_prefecture() -> None:
    areas = gazetteer().areas
    assert len(areas) > 1900 and len({area.code[:2] for area in areas}) == 47
    # 江差町 and 枝幸町, both in Hokkaido, are both read えさしちょう (Esashi-cho).
    homophones = {"013617", "015148"}
    for area in areas:
        queries = [
            area.code,
            area.code5,
            area.prefecture_ja + area.name_ja,
            f"{area.prefecture_ja}{area.name_ja}1-2-3",
        ]
        if area.code not in homophones:
            queries.append(area.prefecture_ja + area.name_kana)
            queries.append(f"{area.name_romaji}, {area.prefecture_romaji}")
        for query in queries:
            assert resolve_place(query) == area, query


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("北海道札幌市中央区北1条西2丁目", "011011"),  # the longest name wins: the ward
        ("札幌市中央区北1条西2丁目", "011011"),
        ("北海道札幌市中央区北１条西２丁目", "011011"),  # full-width digits
        ("札幌市", "011002"),  # the city itself stays the city
        ("Sapporo Chuo-ku", "011011"),
        ("東京都中央区銀座4丁目", "131024"),  # a Tokyo special ward is a municipality
        ("大阪市北区梅田1丁目", "271276"),
        ("広島県府中市府川町", "342084"),
        ("東京都府中市宮西町1丁目", "132063"),
        ("広島県　府中市", "342084"),  # an ideographic space
        ("ひろしまけんふちゅうし", "342084"),
        ("袖ヶ浦市", "122297"),  # officially 袖ケ浦市
        ("Kyōto", "261009"),
        ("Ōsaka-shi", "271004"),
        ("Toukyou Chiyoda", "131016"),
        ("OHTSU", "252018"),
        ("Kanonji", "372056"),  # Kan'onji
        ("Fuchu-shi, Hiroshima", "342084"),
        ("Tokyo Fuchu", "132063"),
        ("Fuchu Hiroshima", "342084"),  # the city, not the town 府中町 beside it
        ("Yokohama Kanagawa", "141003"),  # the city in its prefecture, not Kanagawa-ku
        ("Yokohama Kanagawa-ku", "141020"),
        ("Shimamoto-cho, Osaka", "273015"),  # "cho" and "Osaka" do not fold into "chosaka"
        ("Fuchu-cho", "343021"),
        ("Sapporo City", "011002"),
        ("Sapporo, Hokkaido, Japan", "011002"),
        ("横浜", "141003"),  # without a suffix the one city wins over 横浜町
        ("Yokohama", "141003"),
        ("  sapporo  ", "011002"),
        ("01100-2", "011002"),
    ],
)
def test_addresses_and_spellings(query: str, code: str) -> None:
    # An address is placed at its 町丁目's point: its code carries the point (code@lat,lon).
    assert resolve_place(query).code.split("@")[0] == code


@pytest.mark.parametrize(
    "query",
    [
        "〒160-0023 東京都新宿区西新宿2-8-1",
        "160-0023 東京都新宿区西新宿2-8-1",
        "〒１６０－００２３　東京都新宿区西新宿２－８－１",  # full-width digits, hyphen, space
        "1600023東京都新宿区西新宿2",
        "〒160‐0023 新宿区西新宿二丁目",  # a Japanese hyphen (U+2010)
        "〒160-0023 2-8-1 Nishi-Shinjuku, Shinjuku-ku, Tokyo",
    ],
)
def test_a_postal_code_before_an_address_is_ignored(query: str) -> None:
    assert resolve_place(query).name_ja == "新宿区"


# A postal code alone used to be refused ("looks like a postal code"); it now names its
# municipality from Japan Post's data: see tests/test_places_current.py.
@pytest.mark.parametrize(
    "query", ["160-0023", "1600023", "〒1600023", "〒160-0023", "１６０－００２３", "〒160-0023、"]
)
def test_a_postal_code_alone_names_its_municipality(query: str) -> None:
    assert resolve_place(query).code == "131041"  # 新宿区


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("伊達市（北海道）", "012335"),
        ("伊達市(北海道)", "012335"),
        ("伊達市、福島県", "072133"),
        ("（北海道）伊達市", "012335"),
        ("伊達（北海道）", "012335"),  # without the suffix, the one city in Hokkaido
        ("府中市 東京都", "132063"),
        ("府中市　広島県", "342084"),
        ("Date-shi, Hokkaido", "012335"),
        ("Date-shi (Fukushima)", "072133"),
        ("Fuchu, Tokyo", "132063"),
    ],
)
def test_the_prefecture_may_follow_the_name(query: str, code: str) -> None:
    assert resolve_place(query).code == code


def test_two_different_prefectures_are_refused() -> None:
    with pytest.raises(PlaceNotFound, match="names two different prefectures"):
        resolve_place("東京都府中市（広島県）")


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("Chuo-ku, Sapporo", "011011"),
        ("Sapporo Chuo-ku", "011011"),
        ("1-1 Marunouchi, Chiyoda-ku, Tokyo", "131016"),
        ("Kita 1 Nishi 2, Chuo-ku, Sapporo", "011011"),
        ("Kita 1 Nishi 2, Chuo-ku, Sapporo-shi, Hokkaido, Japan", "011011"),
        ("kita-ku osaka", "271276"),  # the ward of Osaka city, not of Osaka prefecture
        ("Kita-ku, Osaka", "271276"),
        ("Osaka Kita-ku", "271276"),
        ("Kanagawa-ku, Yokohama", "141020"),
        ("Chiyoda-ku, Tokyo 100-0005, Japan", "131016"),  # a trailing postal code
        ("Chuo-ku, Tokyo", "131024"),  # a special ward in its prefecture
    ],
)
def test_a_western_order_address_names_its_ward_or_city(query: str, code: str) -> None:
    # A street read by its town's reading is a spot in that unit ("131016@35.68...").
    assert resolve_place(query).code.split("@")[0] == code


def test_every_ward_resolves_in_western_order() -> None:
    gaz = gazetteer()
    wards = [area for area in gaz.areas if gaz.is_ward(area)]
    assert len(wards) > 150
    for area in wards:
        city, ward = area.name_romaji.split(" ")
        assert resolve_place(f"{ward}, {city}") == area
        # 本町 where the ward has one (its 一丁目, 番地 2), else the ward: in the ward, always.
        honcho = resolve_place(f"1-2 Honcho, {ward}, {city}, {area.prefecture_romaji}")
        assert honcho.code5 == area.code5


def test_a_ward_with_the_prefecture_alone_stays_ambiguous() -> None:
    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place("Kita-ku, Osaka-fu")
    assert {area.code for area in info.value.choices} == {"271276", "271462"}  # Osaka, Sakai


@pytest.mark.parametrize(
    "query", ["S.a.p.p.o.r.o", "sap/poro", "Sap1poro", "Sapporo" + "-" * 190, "Sapporo, x.y"]
)
def test_punctuation_inside_a_word_is_not_read_through(query: str) -> None:
    with pytest.raises(PlaceNotFound, match="No municipality matches") as info:
        resolve_place(query)
    assert "011002" in [area.code for area in info.value.suggestions]


@pytest.mark.parametrize(
    "query",
    ["sapporo-shi", "Sapporo shi", "Sapporo,Hokkaido", "Sapporo (Hokkaido)", "Kita 1, Sapporo"],
)
def test_ordinary_separators_still_work(query: str) -> None:
    assert resolve_place(query).code == "011002"


@pytest.mark.parametrize(
    ("query", "codes"),
    [
        ("府中市", {"132063", "342084"}),
        ("Fuchu", {"132063", "342084", "343021"}),
        ("府中", {"132063", "342084", "343021"}),
        ("伊達市", {"012335", "072133"}),
        ("Date", {"012335", "072133"}),
        ("森町", {"013455", "224618"}),
    ],
)
def test_a_shared_name_offers_every_choice(query: str, codes: set[str]) -> None:
    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place(query)
    assert {area.code for area in info.value.choices} == codes
    message = str(info.value)
    assert message.startswith(f'"{query}" matches {len(codes)} places, in ')
    assert all(area.prefecture_romaji in message for area in info.value.choices)


def test_the_ambiguity_message_names_the_prefectures() -> None:
    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place("府中市")
    assert str(info.value) == (
        '"府中市" matches 2 places, in Tokyo and Hiroshima. '
        "Add the prefecture, or choose one by its local-government code."
    )


def test_a_bare_ward_name_is_ambiguous_across_cities() -> None:
    with pytest.raises(PlaceAmbiguous) as info:
        resolve_place("中央区")
    codes = {area.code for area in info.value.choices}
    assert {"131024", "011011", "271284"} <= codes  # Tokyo, Sapporo, Osaka


def test_a_typo_suggests_the_place() -> None:
    with pytest.raises(PlaceNotFound) as info:
        resolve_place("Sapporro")
    assert info.value.suggestions[0].code == "011002"
    assert len(info.value.suggestions) <= 5
    assert str(info.value) == 'No municipality matches "Sapporro".'


def test_a_kanji_typo_suggests_the_place() -> None:
    with pytest.raises(PlaceNotFound) as info:
        resolve_place("札晃市")
    assert info.value.suggestions[0].code == "011002"


@pytest.mark.parametrize("query", ["xyzzy", "---", "!!!", "東京タワー"])
def test_nonsense_is_not_found(query: str) -> None:
    with pytest.raises(PlaceNotFound, match=f'No municipality matches "{query}"'):
        resolve_place(query)


@pytest.mark.parametrize("query", ["", "   ", "\u3000", "\n"])
def test_an_empty_query_is_not_found(query: str) -> None:
    with pytest.raises(PlaceNotFound, match="Type a place"):
        resolve_place(query)


def test_a_wrong_check_digit_is_refused() -> None:
    with pytest.raises(PlaceNotFound) as info:
        resolve_place("011003")
    assert "check digit of 01100 is 2, not 3" in str(info.value)
    assert [area.code for area in info.value.suggestions] == ["011002"]


@pytest.mark.parametrize("query", ["0110", "0110022", "13999", "139998"])
def test_a_code_that_names_nothing_is_not_found(query: str) -> None:
    with pytest.raises(PlaceNotFound):
        resolve_place(query)


@pytest.mark.parametrize("query", ["Tokyo", "東京都", "東京", "とうきょうと", "130001", "13000"])
def test_a_prefecture_asks_for_a_municipality(query: str) -> None:
    with pytest.raises(PlaceNotFound, match="is a prefecture, not a municipality") as info:
        resolve_place(query)
    assert info.value.suggestions[0].name_ja == "千代田区"


def test_an_area_round_trips_through_json() -> None:
    area = resolve_place("札幌市中央区")
    again = Area.from_dict(json.loads(json.dumps(area.to_dict())))
    assert again == area
    assert again.to_dict() == area.to_dict()  # == compares codes and names, not tiles
    assert isinstance(again.tiles[0], tuple)


def test_tile_arithmetic_matches_the_slippy_map_scheme() -> None:
    assert tile_of(0.0, 0.0, 1) == (1.0, 1.0)
    x, y = tile_of(35.681236, 139.767125, 12)  # Tokyo Station is in tile 12/3638/1612
    assert (int(x), int(y)) == (3638, 1612)


def test_an_area_reads_the_two_by_two_tiles_around_it() -> None:
    area = resolve_place("131016")
    x, y = tile_of(area.lat, area.lon, 12)
    assert len(set(area.tiles)) == 4
    assert (12, int(x), int(y)) in area.tiles
    xs = sorted({tx for _, tx, _ in area.tiles})
    ys = sorted({ty for _, _, ty in area.tiles})
    assert xs[1] - xs[0] == 1 and ys[1] - ys[0] == 1
    assert tiles_around(area.lat, area.lon) == area.tiles


def test_concurrent_first_lookups_build_the_index_once(monkeypatch) -> None:
    builds: list[object] = []

    def slow_build() -> object:
        time.sleep(0.05)  # long enough for every thread to arrive while it runs
        builds.append(object())
        return builds[-1]

    monkeypatch.setattr(gazetteer_module, "_built", None)
    monkeypatch.setattr(gazetteer_module, "build", slow_build)
    barrier = threading.Barrier(8)
    got: list[object] = []

    def first_lookup() -> None:
        barrier.wait(5)
        got.append(gazetteer())

    threads = [threading.Thread(target=first_lookup) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(builds) == 1
    assert got == builds * 8
