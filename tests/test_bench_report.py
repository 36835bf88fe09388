"""The benchmark report says what the figures say: the page, its summary rows and verdicts.

tests/recorded/bench/results-a4f4081.json holds the figures of bench/RESULTS.md as
committed in a4f4081 (`make bench` of 2026-12-01 12:38 UTC on commit c674094) as data in
the shape bench/run.py writes to bench/logs/results.json. It is constructed, not recorded:
that run's results.json was not kept, so each value is the printed figure, with a digit
more where the report computes a ratio or a difference from it. RESULTS-a4f4081.md is that
RESULTS.md as it was committed, kept as the record of that run.

Targets have been raised since (issue 28: the closed loop's 1a to >= 0.8x and 1b to >= 1.3x,
2a also <= 2x the constant's p99), so today's code gives those same figures other verdicts.
RESULTS-a4f4081-current-targets.md is the page today's code renders from the recorded
figures (`python -m bench.report tests/recorded/bench/results-a4f4081.json`), committed as
generated: the same figures, verdicts under the current targets. The tests check both:
the current code renders exactly that page, and it differs from the page a4f4081 committed
only in the target and verdict of the rows whose target was raised, and in the memory
rows and section: issue 35 measures other things there (a bare interpreter with the same
libraries, zone jobs, the cost per running job), which that run did not record (n/a); and
in row 1f and the histogram's section: the histogram's cost is measured in the closed
loop's rounds since (bench/poll_closed.py's status_nometrics), where that run measured it on
a server of its own, so today's code reads no 1f from those figures (n/a).
No server, no database: the report is a function of data.
"""

import importlib
import inspect
import json
import re
from pathlib import Path

import pytest

from bench.report import SECTIONS, render
from bench.run import PLAN

RECORDED = Path(__file__).resolve().parent / "recorded" / "bench"


@pytest.fixture
def results() -> dict:
    return json.loads((RECORDED / "results-a4f4081.json").read_text())


def test_the_recorded_figures_render_the_page_committed_with_them(results):
    expected = (RECORDED / "RESULTS-a4f4081-current-targets.md").read_text()
    assert render(results) == expected


# The rows whose target was raised after a4f4081: their target and verdict today.
RAISED = {
    "1a": (">= 0.8x", "**MISS**"),
    "1b": (">= 1.3x", "**MISS**"),
    "2a": ("< 100 ms, <= 2x constant", "**MISS**"),
}


def without_remeasured(page: str) -> list[str]:
    """The page but for what is measured differently since: the memory rows and section
    (issue 35), row 1f and the histogram's section (now in the closed loop's rounds)."""
    for section in ("## 6. Memory\n", "### The poll's latency histogram on against off\n"):
        head, _, rest = page.partition(section)
        page = head + (rest[rest.index("\n#") + 1 :] if "\n#" in rest else "")
    return [line for line in page.splitlines() if not line.startswith(("| 6", "| 1f |"))]


def test_the_page_keeps_a4f4081s_figures_and_only_the_raised_targets_change(results):
    committed = without_remeasured((RECORDED / "RESULTS-a4f4081.md").read_text())
    rendered = without_remeasured(render(results))
    assert len(rendered) == len(committed)
    changed = {}
    for then, now in zip(committed, rendered, strict=True):
        if then == now:
            continue
        then_cells, now_cells = then.split(" | "), now.split(" | ")
        # A summary row: the number, what, the figure, the baseline and the ratio as then.
        assert len(now_cells) == len(then_cells) == 7 and now_cells[:5] == then_cells[:5], now
        changed[now_cells[0].removeprefix("| ")] = (
            now_cells[5],
            now_cells[6].removesuffix(" |"),
        )
    assert changed == RAISED
    # The memory row keeps its figure, under the decided target.
    row = next(line for line in render(results).splitlines() if line.startswith("| 6 |"))
    assert "| 98.0 MiB |" in row and "| <= 130 MiB | **PASS** |" in row


def summary(page: str) -> dict[str, str]:
    """Each summary row's verdict by its number (the last one of a number that repeats)."""
    table = page.split("## Summary\n")[1].split("\n## ")[0]
    cells = [line.split(" | ") for line in table.splitlines() if re.match(r"\| \d", line)]
    return {row[0].removeprefix("| "): row[-1].removesuffix(" |") for row in cells}


def test_every_summary_row_carries_its_verdict(results):
    verdicts = summary(render(results))
    assert len(verdicts) == 33  # 35 rows; 3b has one per SIGTERM size
    # a4f4081 missed 1f and 2a; under the targets raised since, 1a and 1b miss too. Its 1f
    # was measured apart from the closed loop: today's code reads none from it.
    assert [n for n, v in verdicts.items() if v == "**MISS**"] == ["1a", "1b", "2a"]
    assert verdicts["1f"] == "n/a"
    assert sum(v == "**PASS**" for v in verdicts.values()) == 13


def test_a_verdict_follows_its_figure_across_the_target(results):
    results["poll_closed"]["ratios"]["status/constant"]["median"] = 0.49
    results["memory"]["product"]["with_jobs"]["VmRSS"] = 131 * 1024
    results["poll_open"]["p99_ms"] = 99.9
    verdicts = summary(render(results))
    assert (verdicts["1a"], verdicts["6"], verdicts["2a"]) == ("**MISS**", "**MISS**", "**PASS**")
    # Row 1f from the closed loop's rounds: the histogram's poll against the one without.
    closed = results["poll_closed"]
    closed["endpoints"]["status_nometrics"] = {**closed["endpoints"]["status"], "rps_median": 530.0}
    for median, verdict in ((0.94, "**MISS**"), (0.96, "**PASS**")):
        closed["ratios"]["status/status_nometrics"] = {"median": median, "rounds": [median]}
        assert summary(render(results))["1f"] == verdict


def test_a_benchmark_that_failed_says_so_in_the_summary_and_below(results):
    results["outage"] = {"error": "RuntimeError: server not ready after 60 s"}
    page = render(results)
    assert "| 3d | database outage | RuntimeError: server not ready after 60 s |" in page
    assert "## 3b. Database outage" not in page
    assert "- outage: RuntimeError: server not ready after 60 s" in page
    assert "| 3c |" in page and "| 4a |" in page  # the others still report


@pytest.mark.parametrize("name", list(PLAN))
def test_every_planned_benchmark_runs_and_reports_one_way(name):
    module = importlib.import_module(f"bench.{name}")
    parameters = inspect.signature(module.run).parameters
    assert next(iter(parameters)) == "db"
    for options in PLAN[name]:  # make bench's, then --quick's: each a parameter of run()
        assert set(options) <= set(parameters), options
    assert name in SECTIONS and module.NUMBER and module.NAME
    assert callable(module.summary) and callable(module.details)


def test_each_closed_loop_row_is_measured_in_the_same_rounds_as_its_baseline():
    from bench import poll_closed

    for _number, _figure, endpoint, base, *_ in poll_closed.AT_LEAST:
        assert {endpoint, base} <= set(poll_closed.ENDPOINTS)
        assert f"{endpoint}/{base}" in poll_closed.RATIOS
    # Every status endpoint but status_rendered asks as a browser that kept the fragment.
    status = {ep for ep in poll_closed.ENDPOINTS if ep.startswith("status")}
    assert set(poll_closed.REVALIDATED) == status - {"status_rendered"}
