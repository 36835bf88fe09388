"""Before a point is spent the form names the place; notices offer choices, each said once."""

import re
from urllib.parse import quote

from tests.conftest import job_id_from, signed_in, wait_for


def buttons(html: str) -> list[str]:
    return [
        re.sub(r"\s+", " ", b).strip()
        for b in re.findall(r"<button[^>]*>(.*?)</button>", html, re.S)
    ]


def test_the_form_names_the_place_a_query_would_assess(make_app):
    app, client, actions = signed_in(make_app)
    sapporo = client.get("/assessments/place?query=Sapporo").get_data(as_text=True)
    assert re.search(r"To be assessed:</span> <strong[^>]*>Sapporo, Hokkaido</strong>", sapporo)
    assert "The whole city, its 10 wards together" in sapporo
    postal = client.get("/assessments/place?query=〒430-0946").get_data(as_text=True)
    assert "<strong" in postal and "(the municipality of postal code 430-0946)" in postal
    assert "Hamamatsu" in postal
    ja = client.get("/assessments/place?query=430-0946", headers={"Accept-Language": "ja"})
    assert "静岡県浜松市中央区" in ja.get_data(as_text=True)
    many = client.get("/assessments/place?query=府中市").get_data(as_text=True)
    assert "Several places have this name" in many and "<strong" not in many
    assert "<strong" not in client.get("/assessments/place?query=zzzz").get_data(as_text=True)
    # A chosen place fills the form, and the form names it before the button.
    form = client.get("/assessments/new?query=東京都府中市").get_data(as_text=True)
    assert form.index("To be assessed:") < form.index("Start assessment (1 point)")
    assert 'hx-get="/assessments/place"' in form


def test_a_report_you_have_is_a_named_choice_with_one_button_that_costs_a_point(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id_from(actions.submit("430-0946"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    again = actions.submit("430-0946").get_data(as_text=True)
    assert 'class="notice duplicate"' in again and 'class="alert' not in again
    assert re.search(
        r"You already have a finished report of Hamamatsu-shi Chuo-ku, Shizuoka in English", again
    ), again
    assert [b for b in buttons(again) if "1 point" in b] == ["Start a new one anyway (1 point)"]


def test_several_places_and_an_abolished_ward_are_choices_said_once(make_app):
    app, client, actions = signed_in(make_app)
    fuchu = actions.submit("府中市").get_data(as_text=True)
    assert 'class="notice choices"' in fuchu and 'class="alert' not in fuchu
    assert fuchu.count("matches 2 places") == 1 and "places match" not in fuchu
    ward = actions.submit("浜松市中区").get_data(as_text=True)
    assert 'class="notice choices"' in ward and 'class="alert' not in ward
    assert ward.count("became part of") == 1
    missing = actions.submit("").get_data(as_text=True)
    assert 'class="field-error"' in missing or 'class="alert"' in missing


def test_a_confirmation_covers_the_place_it_was_given_for_only(make_app, sql):
    app, client, actions = signed_in(make_app)
    for place in ("Sapporo", "Sendai"):
        job_id_from(actions.submit(place))
        wait_for(
            lambda: (
                sql("SELECT count(*) FROM assessment_jobs WHERE status <> 'succeeded'") == [(0,)]
            )
        )
    again = actions.submit("Sapporo").get_data(as_text=True)
    assert 'name="confirm" value="011002"' in again
    # The reader types another place they already have a report of: warned again.
    other = actions.submit("Sendai", confirm="011002")
    assert other.status_code == 409 and "Sendai" in other.get_data(as_text=True)
    assert actions.submit("Sapporo", confirm="011002").status_code == 303


def test_a_street_typed_in_romaji_is_said_unread_and_asked_about_before_a_point_is_spent(
    make_app, sql
):
    """ "Sangenjaya 2-chome, Setagaya" was silently the whole of Setagaya-ku, a point spent.
    Now read by its town's reading (below); a street no reading fits is said unread."""
    app, client, actions = signed_in(make_app)
    typed = "Sangenchaya 2-chome, Setagaya"  # a common misspelling: no town reads so
    for lang, said, meant in (
        ("en", "“Sangenchaya 2-chome” was not read, so the whole municipality",
         "Sangenjaya 2-chome (三軒茶屋二丁目), Setagaya-ku, Tokyo</a>?"),
        ("ja", "「Sangenchaya 2-chome」は読み取れなかったため、市区町村全体を評価",
         "東京都世田谷区三軒茶屋二丁目</a>？"),
    ):  # fmt: skip
        preview = client.get(
            f"/assessments/place?query={typed}", headers={"Accept-Language": lang}
        ).get_data(as_text=True)
        assert said in preview and 'data-unread="Sangenchaya 2-chome"' in preview
        # The 町丁目 whose reading is nearest, a link that fills the form: never chosen for them.
        near = preview[preview.index("data-near") :]
        assert meant in near[: near.index("</p>")]
    plain = client.get("/assessments/place?query=Chuo-ku, Sapporo").get_data(as_text=True)
    assert "data-unread" not in plain  # every word read: nothing to say
    answer = actions.submit(typed)
    body = answer.get_data(as_text=True)
    assert answer.status_code == 400 and "“Sangenchaya 2-chome” was not read" in body
    assert "Choose the 町丁目 whose name is nearest it, or the whole municipality" in body
    # Both offered free: the nearest 町丁目 and the whole ward.
    offers = re.findall(r'<li><a class="button secondary" href="[^"]*">([^<]*)</a>', body)
    assert sorted(o.split(" (")[0] for o in offers) == ["Sangenjaya 2-chome", "Setagaya-ku, Tokyo"]
    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]
    assert sql("SELECT point_balance FROM users") == [(3,)]
    chosen = actions.submit("Setagaya-ku, Tokyo")  # what the choice fills the form with
    assert chosen.status_code == 303
    # A street no town's reading comes near: said unread, and nothing guessed.
    far = client.get("/assessments/place?query=Zzyzx 2-chome, Setagaya").get_data(as_text=True)
    assert 'data-unread="Zzyzx 2-chome"' in far and "data-near" not in far


def test_a_street_typed_in_romaji_is_read_by_its_town_s_reading(make_app, sql):
    app, client, actions = signed_in(make_app)
    preview = client.get(
        "/assessments/place?query=Sangenjaya 2-chome, Setagaya", headers={"Accept-Language": "en"}
    ).get_data(as_text=True)
    assert "Sangenjaya 2-chome (三軒茶屋二丁目), Setagaya-ku, Tokyo" in preview, preview
    assert "data-unread" not in preview
    job = actions.submit("Sangenjaya 2-1-1, Setagaya-ku, Tokyo")
    assert job.status_code == 303
    (area,) = sql("SELECT area FROM assessment_jobs")[0]
    assert (area["address"]["matched"], area["address"]["banchi"]) == (
        "東京都世田谷区三軒茶屋二丁目",
        "1-1",
    )


def test_a_chome_name_many_municipalities_have_offers_them_before_a_point_is_spent(make_app, sql):
    """山下町, typed alone, was "add its municipality" with nothing to choose."""
    app, client, actions = signed_in(make_app)
    preview = client.get("/assessments/place?query=山下町").get_data(as_text=True)
    assert "Several places have this name" in preview and "<strong" not in preview
    answer = actions.submit("山下町")
    body = answer.get_data(as_text=True)
    assert answer.status_code == 400 and 'class="notice choices"' in body
    assert body.count("names a 町丁目 (or 大字) in 25 municipalities: choose one.") == 1
    # Each municipality once, named in romaji too; a choice fills the form, free.
    assert "Yamashitacho (山下町), Kitami, Hokkaido" in body
    assert f"query={quote('神奈川県横浜市中区山下町')}&amp;" in body  # Yokohama's, as it is
    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]
    assert sql("SELECT point_balance FROM users") == [(3,)]
    client.post("/language", data={"lang": "ja", "csrf_token": actions.token("/")})
    ja = actions.submit("山下町", lang="ja").get_data(as_text=True)
    assert "「山下町」という町丁目（または大字）は25市区町村にあります。一つを選んで" in ja
    assert "北海道北見市山下町" in ja


def test_a_chome_name_too_many_municipalities_have_asks_for_one_before_the_submit(make_app):
    """本町 (299 municipalities) showed no preview at all, only an error once submitted."""
    app, client, actions = signed_in(make_app)
    for lang, said in (
        ("en", "A 町丁目 (or 大字) of this name is in 299 municipalities: add its municipality"),
        ("ja", "この名前の町丁目（または大字）は299市区町村にあります。市区町村名を加えて"),
    ):
        preview = client.get("/assessments/place?query=本町", headers={"Accept-Language": lang})
        assert said in preview.get_data(as_text=True)
    other = client.get("/assessments/place?query=zzzz").get_data(as_text=True)
    assert "data-towns" not in other  # a name no municipality has: nothing to add
