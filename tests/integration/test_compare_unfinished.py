"""`python -m flipgate compare` tells the truth about its inputs (issue #60): a run that did not
finish (killed, interrupted, crashed) on either side is named in one line and refused unless
`--allow-unfinished`, which makes the comparison partial and says so; it is never blamed on a
grammar or seed. A run with no trial and one run on both sides are refused, whatever the flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.regression_compare import arm, compare
from support.regression_runs import FACET, K, make_run, runs_root

from flipgate import FlipgateError
from flipgate.__main__ import main
from flipgate.exitcodes import USAGE_ERROR
from flipgate.regression.compare import IncomparableCell
from flipgate.regression.runs import RunRecord
from flipgate.store import TrialStore

ITEMS = 20
#: what a killed run of ITEMS items on ds_a and ds_b planned (model m, option_order, K orderings)
PLAN = {("m", ds, FACET): ITEMS * K for ds in ("ds_a", "ds_b")}


def flipping(i: int, condition: int) -> str:
    """Every item changes its answer when reordered."""
    return "A" if condition == 0 else "B"


@pytest.fixture
def runs(tmp_path):
    return runs_root(tmp_path)


def kill(run: Path, plan: dict | None = None) -> Path:
    """The store as a run killed part-way leaves it: its plan recorded at collection, the trials
    of the cells it reached, and no end (its ``meta`` is written only at the end)."""
    store = TrialStore(run / "trials.sqlite")
    store.add_planned(PLAN if plan is None else plan)
    with store.writing():
        store.conn.execute("DELETE FROM meta")
    store.conn.close()
    return run


def finished(root: Path, run_id: str = "20260101T000000Z-base", **kw) -> Path:
    return make_run(root, run_id, items=range(ITEMS), datasets=("ds_a", "ds_b"), **kw)


def killed(root: Path, run_id: str = "20260102T000000Z-cand", items: int = 8, **kw) -> Path:
    """Killed while its second cell ran: ``items`` items of ds_a, nothing of ds_b."""
    return kill(make_run(root, run_id, items=range(items), **kw))


def compare_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def refused(code: int, out: str, err: str, *needles: str) -> str:
    """The one ``flipgate:`` line of a refusal, checked for ``needles`` and for no blame on a
    grammar or seed."""
    assert code == USAGE_ERROR and out == "", (out, err)
    [line] = err.strip().splitlines()
    assert line.startswith("flipgate: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in line, line
    assert "grammar" not in line and "seed" not in line, line
    return line


# ---------------------------------------------------------------------------- an unfinished run


@pytest.mark.parametrize("flags", [[], ["--allow-ungated"]], ids=["plain", "allow-ungated"])
def test_a_killed_candidate_is_named_and_refused(runs, capsys, flags):
    """The sweep's case: a finished baseline and a killed candidate once passed with 0 regressions
    on the items the candidate happened to hold (with --allow-ungated, exit 0)."""
    root, thresholds = runs
    base, cand = finished(root), killed(root)
    code, out, err = compare_cli(capsys, base, cand, "--thresholds", thresholds, *flags)
    refused(
        code,
        out,
        err,
        f"candidate {cand / 'trials.sqlite'}: run 20260102T000000Z-cand has not finished",
        "killed",
        "holds 32 of 160 planned trials",
        "--allow-unfinished",
    )


def test_a_killed_baseline_is_named_and_not_blamed_on_the_grammar(runs, capsys):
    """A killed run records no grammar version or seed; its manifests, redrawn from the items it
    reached, differ from the ones it recorded, which once read as "another grammar or seed"."""
    root, thresholds = runs
    base = killed(root, "20260101T000000Z-base")
    cand = finished(root, "20260102T000000Z-cand")
    code, out, err = compare_cli(capsys, base, cand, "--thresholds", thresholds)
    refused(code, out, err, f"baseline {base / 'trials.sqlite'}: run ", "has not finished")
    # as an audit's --baseline (flipgate.regression.baseline): the same honest line
    with pytest.raises(FlipgateError) as caught:
        RunRecord.open(base).check_grammar(42)
    assert "has not finished" in str(caught.value) and "another grammar" not in str(caught.value)


def test_both_unfinished_are_named_in_one_line(runs, capsys):
    root, thresholds = runs
    base = make_run(
        root,
        "20260101T000000Z-base",
        items=range(12),
        meta={"interrupted": "SIGINT", "exit_status": 2},
    )
    cand = killed(root)
    code, out, err = compare_cli(capsys, base, cand, "--thresholds", thresholds)
    line = refused(
        code,
        out,
        err,
        "baseline ",
        "was interrupted (SIGINT; exit status 2)",
        "candidate ",
        "has not finished",
        "only what they recorded",
    )
    assert line.index("baseline ") < line.index("candidate ")


@pytest.mark.parametrize(
    "meta, why",
    [
        ({"exit_status": 3}, "ended with exit status 3 (internal error)"),
        ({"exit_status": 2}, "ended with exit status 2 (interrupted)"),
    ],
    ids=["crashed", "stopped"],
)
def test_a_crashed_or_stopped_candidate_is_refused(runs, capsys, meta, why):
    root, thresholds = runs
    base = finished(root)
    cand = make_run(root, "20260102T000000Z-cand", items=range(ITEMS), meta=meta)
    code, out, err = compare_cli(capsys, base, cand, "--thresholds", thresholds)
    refused(code, out, err, "candidate ", why, "holds 80 trials", "--allow-unfinished")


# ------------------------------------------------------------------------- --allow-unfinished


def test_allow_unfinished_compares_the_shared_items_and_says_it_is_partial(runs, capsys):
    root, thresholds = runs
    base, cand = finished(root), killed(root)
    args = [base, cand, "--thresholds", thresholds, "--allow-unfinished"]
    code, out, err = compare_cli(capsys, *args)
    assert code == 0, (out, err)
    assert "| m vs m@20260101T000000Z-base | option_order | ds_a |" in out
    assert "| 8 |" in out  # the delta rows count the 8 items both answered
    assert (
        f"note: candidate {cand / 'trials.sqlite'}: run 20260102T000000Z-cand has not finished"
        in out
    )
    assert "holds 32 of 160 planned trials: a partial comparison" in out
    assert "its run stopped before this cell" in out  # ds_b, which it never reached
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("partial comparison, 8 of 40 items: 1 cell compared, 1 skipped")
    assert "(1 not reached by the unfinished run)" in summary and "0 regressions" in summary
    code, out, err = compare_cli(capsys, *args, "--format", "json")
    data = json.loads(out)
    assert data["summary"]["partial"] == {"items": 8, "of": 40}
    assert data["summary"]["not_reached"] == 1 and data["skipped"][0]["items"] == ITEMS
    assert err.strip().splitlines()[-1].startswith("partial comparison, 8 of 40 items")


def test_allow_unfinished_still_gates_what_it_compares(runs, capsys):
    root, thresholds = runs
    base, cand = finished(root), killed(root, answer=flipping)
    code, out, _ = compare_cli(capsys, base, cand, "--thresholds", thresholds, "--allow-unfinished")
    assert code == 1 and out.strip().splitlines()[-1].endswith("1 regression")


def test_allow_unfinished_with_a_killed_baseline_and_both_unfinished(runs, capsys):
    root, thresholds = runs
    base = killed(root, "20260101T000000Z-base", items=12)
    cand = finished(root, "20260102T000000Z-cand")
    code, out, err = compare_cli(
        capsys, base, cand, "--thresholds", thresholds, "--allow-unfinished"
    )
    assert code == 0, (out, err)
    assert out.strip().splitlines()[-1].startswith("partial comparison, 12 of 40 items")
    assert "grammar" not in out + err
    cand = killed(root, "20260103T000000Z-cand")
    code, out, err = compare_cli(
        capsys, base, cand, "--thresholds", thresholds, "--allow-unfinished"
    )
    assert code == 0, (out, err)
    assert out.count("has not finished") == 2
    assert out.strip().splitlines()[-1].startswith("partial comparison, 8 of 12 items")


def test_a_cell_the_unfinished_run_never_planned_is_still_unchecked(runs, capsys):
    """--allow-unfinished accepts only what the run's stop left out: a cell it never planned is
    a skipped cell like any other (--allow-ungated)."""
    root, thresholds = runs
    base = finished(root)
    cand = kill(make_run(root, "20260102T000000Z-cand", items=range(8)), {("m", "ds_a", FACET): 80})
    args = [base, cand, "--thresholds", thresholds, "--allow-unfinished"]
    code, out, err = compare_cli(capsys, *args)
    assert code == USAGE_ERROR and "not everything was checked" in err
    assert "its run stopped before this cell" not in out
    assert compare_cli(capsys, *args, "--allow-ungated")[0] == 0


def test_a_partly_answered_item_is_left_out_of_a_partial_comparison():
    """A run stopped part-way through an item (some of its orderings): the cell is compared on
    the items both versions answered in full, and only with one manifest."""
    full = {f"i{n}": [0, 0, 0, 0] for n in range(5)}
    part = {**{f"i{n}": [0, 0, 0, 0] for n in range(3)}, "i3": [0, 1]}
    cmp = compare(arm("base", full), arm("cand", part), unfinished=True)
    o = cmp.overlap
    assert (o.baseline_items, o.candidate_items, o.shared_items, o.shared_pairs) == (5, 4, 3, 12)
    with pytest.raises(IncomparableCell, match="did not answer the same manifest"):
        compare(arm("base", full), arm("cand", part, sha="b" * 64), unfinished=True)


# ---------------------------------------------------------------------------- other inputs


@pytest.mark.parametrize("side", ["baseline", "candidate"])
def test_a_run_with_no_trial_is_refused_even_when_unfinished_is_allowed(runs, capsys, side):
    root, thresholds = runs
    empty = make_run(root, "20260103T000000Z-empty", items=(), meta={"exit_status": 6})
    base = finished(root) if side == "candidate" else empty
    cand = finished(root, "20260102T000000Z-cand") if side == "baseline" else empty
    code, out, err = compare_cli(
        capsys, base, cand, "--thresholds", thresholds, "--allow-unfinished"
    )
    refused(
        code,
        out,
        err,
        f"{side} {empty / 'trials.sqlite'}: run 20260103T000000Z-empty recorded 0 trials",
        "exit status 6 (refused by the cost guard)",
        "nothing to compare",
    )


def test_a_run_and_its_promoted_copy_are_one_run(runs, capsys, tmp_path):
    root, thresholds = runs
    run = finished(root)
    assert main(["baseline", str(run), "--to", str(tmp_path / "baseline")]) == 0
    capsys.readouterr()
    code, out, err = compare_cli(capsys, tmp_path / "baseline", run, "--thresholds", thresholds)
    refused(code, out, err, "are the same run 20260101T000000Z-base")


def test_help_names_the_flag(capsys):
    assert main(["compare", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--allow-unfinished" in out and "did not finish" in out
