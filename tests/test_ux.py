"""What a point buys, seen through the test client: said before paying, controlled after."""

from tests.conftest import Actions, signed_in

DEMO = "demonstration data"


def test_demo_data_is_said_before_paying(make_app):
    app, client, actions = signed_in(make_app)
    form = client.get("/assessments/new").get_data(as_text=True)
    assert DEMO in form and 'aria-describedby="demo-note"' in form
    welcome = make_app().test_client().get("/").get_data(as_text=True)
    assert DEMO in welcome


def test_real_data_says_nothing_of_demonstrations(make_app):
    app, client, actions = signed_in(
        make_app, LAYER_PROVIDER="http", LAYER_HTTP_BASE_URL="http://127.0.0.1:9"
    )
    assert DEMO not in client.get("/assessments/new").get_data(as_text=True)
    assert DEMO not in app.test_client().get("/").get_data(as_text=True)
