"""Two to four finished reports side by side, chosen from the history (issue 47)."""

from flask import Blueprint, abort, current_app, render_template, request
from flask_login import current_user, login_required

from ..assessment.report import analysis
from ..jobs import views
from ..points import ledger
from . import i18n

bp = Blueprint("compare", __name__, url_prefix="/assessments")

FEWEST, MOST = 2, 4  # two homes at least; more than four columns no longer read side by side

MESSAGES = {
    "malformed": (
        "One of the reports chosen is not a report of ours: choose them again from the history.",
        "選ばれたレポートの中に、当サービスのレポートではないものがあります。履歴から選び直してください。",
    ),
    "count": (
        "Choose two to four finished reports to compare.",
        "比べるには、完了したレポートを2〜4件選んでください。",
    ),
    "unfinished": (
        "Only finished reports can be compared, and one of those chosen has no report:"
        " choose finished ones.",
        "比べられるのは完了したレポートだけです。選ばれたものの中にレポートのないものがあります。"
        "完了したものを選んでください。",
    ),
}


@bp.get("/compare")
@login_required
def compare():
    """Show the chosen finished reports side by side, in the reader's language."""
    balance = ledger.balance_snapshot(current_user.id)  # read first: the rows in its snapshot
    raw = request.args.getlist("ids")
    ids = [views.parse_id(value) for value in raw]
    if any(job_id is None for job_id in ids):
        return _refused(400, "malformed")
    ids = list(dict.fromkeys(ids))  # the same report ticked twice is one column
    if not FEWEST <= len(ids) <= MOST:
        return _refused(400, "count")
    rows = views.chosen_reports(current_user.id, ids)
    if len(rows) != len(ids):
        abort(404)  # another user's report and an unknown one look the same
    if any(row.status != "succeeded" or not row.result for row in rows):
        return _refused(409, "unfinished")
    # Each report re-described in the reader's language from its own figures: free.
    lang = i18n.language()
    columns = [(row.id, analysis.translate(row.result, lang)) for row in rows]
    _same_rows(columns, lang)
    return render_template(
        "assessments/compare.html",
        columns=columns,
        balance=balance,
    )


# A report written before a layer was read has no row of it: its column says so.
NOT_READ = (
    "Not read by this report (written before this layer was read)",
    "このレポートでは読んでいません（この項目を読む前に作成）",
)


def _same_rows(columns: list, lang: str) -> None:
    """Give every column a row for every layer any of them read, in the report's order."""
    names = {layer["key"]: layer["name"] for _, report in columns for layer in report["layers"]}
    order = [layer.key for layer in analysis.LAYERS if layer.key in names]
    for _, report in columns:
        by_key = {layer["key"]: layer for layer in report["layers"]}
        report["layers"] = [
            by_key.get(key)
            or {
                "key": key,
                "name": names[key],
                "state": "not_read",
                "label": NOT_READ[lang == "ja"],
                "level": None,
            }
            for key in order
        ]


def _refused(status: int, reason: str):
    """Say why nothing can be compared, on the page itself, and change nothing."""
    en, ja = MESSAGES[reason]
    body = render_template(
        "assessments/compare.html",
        columns=[],
        error=ja if i18n.language() == "ja" else en,
        reason=reason,
        balance=ledger.balance_snapshot(current_user.id),
    )
    return current_app.make_response((body, status))
