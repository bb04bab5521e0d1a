"""``python -m flipgate compare`` and ``python -m flipgate baseline`` (docs/definitions.md §11,
docs/regression.md).

``compare BASELINE CANDIDATE`` reads two finished runs (``reports/runs/<run_id>``,
``reports/baseline`` or their ``trials.sqlite``), pairs each candidate model with its version in the
baseline run, compares every order cell they share and gates the candidate's ``vs: baseline``
thresholds. It writes nothing; exit 0: every baseline cell was compared and gated and no
regression threshold failed, 1: one failed, 4 (``flipgate.exitcodes.USAGE_ERROR``, as from an
audit): bad or incomparable input (one line on stderr starting ``flipgate: ``), a run that did not
finish without ``--allow-unfinished`` (then a partial comparison, said so), or something was not
checked (a cell of either run the other lacks, or no ``vs: baseline`` threshold applies) without
``--allow-ungated``.

``baseline [RUN]`` promotes a run (default: the latest under ``reports/runs``) to
``reports/baseline``, the baseline ``scripts/audit`` compares with when it exists.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

from flipgate import FlipgateError, __version__, storage
from flipgate.backends.floor import NOT_MEASURED_FLOOR
from flipgate.cell import CellKey
from flipgate.cli import OK, USAGE, Parser, run_command
from flipgate.files import atomic_copy, atomic_write, replace_with
from flipgate.grammar import GRAMMAR_VERSION
from flipgate.regression import table
from flipgate.regression.runs import STORE_NAME, RunRecord, recorded_start

#: exit status of a comparison in which a regression threshold failed
REGRESSION = 1
#: the seed a run without recorded metadata was drawn with (the models.yaml default)
DEFAULT_SEED = 42
N_BOOT = 1000
PROMOTED = "PROMOTED.json"
COST_PROJECTION = "cost_projection.json"
#: how a disk error writing the promoted baseline is named
BASELINE = storage.Place("baseline", "--to", "promote the run again, or give --to another folder")


# ---------------------------------------------------------------------------------------- compare


def _compare_parser() -> Parser:
    p = Parser(
        prog="python -m flipgate compare",
        description="Paired regression table of a candidate run against a baseline run "
        "(docs/definitions.md §11). "
        "Exit 0: no regression threshold failed and nothing went unchecked; 1: one failed; 4: "
        "bad or incomparable input, a run that did not finish (see --allow-unfinished), or a "
        "cell not compared or not gated (see --allow-ungated).",
    )
    p.add_argument(
        "--allow-ungated",
        action="store_true",
        help="exit 0 even when a cell of either run was not compared or no vs: baseline "
        "threshold applies (the table still lists them)",
    )
    p.add_argument(
        "--allow-unfinished",
        action="store_true",
        help="compare even when either run did not finish (killed, interrupted, crashed): on the "
        "items both runs answered in full, skipping the cells the unfinished run never reached; "
        "the output says it is a partial comparison (N of M items)",
    )
    p.add_argument(
        "baseline",
        metavar="BASELINE",
        help="baseline run: reports/runs/<run_id>, reports/baseline or its trials.sqlite",
    )
    p.add_argument(
        "candidate",
        metavar="CANDIDATE",
        help="candidate run: reports/runs/<run_id> or its trials.sqlite",
    )
    p.add_argument(
        "--thresholds",
        default="thresholds",
        metavar="DIR",
        help="thresholds directory whose vs: baseline thresholds gate the deltas (default: "
        "thresholds)",
    )
    p.add_argument(
        "--format", choices=("md", "json"), default="md", help="output format (default: md)"
    )
    p.add_argument(
        "--candidate",
        dest="model",
        default=None,
        metavar="MODEL",
        help="compare only this model of the candidate run (default: every model with order cells)",
    )
    p.add_argument(
        "--baseline-partial",
        action="store_true",
        help="compare the shared (item, ordering) pairs of cells whose manifests differ",
    )
    p.add_argument(
        "--level",
        type=float,
        default=0.95,
        metavar="L",
        help="confidence level of the deltas' bootstrap CIs (default: 0.95)",
    )
    return p


def compare_main(argv: list[str] | None = None) -> int:
    """``python -m flipgate compare BASELINE CANDIDATE ...``; returns the exit status."""
    return run_command(_compare, argv)


def _compare(argv: list[str]) -> int:
    args = _compare_parser().parse_args(argv)
    if not 0 < args.level < 1:
        raise FlipgateError(
            f"option --level: must lie strictly between 0 and 1 (value: {args.level!r})"
        )
    result = compare_runs(
        args.baseline,
        args.candidate,
        args.thresholds,
        args.model,
        args.baseline_partial,
        args.level,
        args.allow_unfinished,
    )
    if args.format == "json":
        data = json.loads(table.to_json(result["comparisons"]))
        data.update(
            {k: result[k] for k in ("baseline_run", "candidate_run", "skipped", "notes", "summary")}
        )
        print(json.dumps(data, indent=2))
        for note in result["notes"]:
            print(f"note: {note}", file=sys.stderr)
        print(result["summary"]["line"], file=sys.stderr)
    else:
        print(_markdown(result, args.level), end="")
    if result["summary"]["failed"]:
        return REGRESSION
    summary = result["summary"]
    # not applicable, or never reached by a run --allow-unfinished accepted as unfinished
    accepted = summary["not_applicable"] + summary["not_reached"]
    unchecked = summary["skipped"] > accepted or not summary["verdicts"]
    if unchecked and not args.allow_ungated:
        print(
            "flipgate: not everything was checked (see the skipped cells above); pass "
            "--allow-ungated to accept that",
            file=sys.stderr,
        )
        return USAGE
    return OK


def _markdown(result: dict, level: float) -> str:
    base, cand = result["baseline_run"], result["candidate_run"]
    lines = [
        f"Regression: candidate run {cand['run_id']} ({cand['trials_store']}) vs baseline run "
        f"{base['run_id']} ({base['trials_store']}; git {base['git_commit'] or '–'}, "
        f"{base['date'] or 'date –'})",
        "",
    ]
    if result["comparisons"]:
        lines.append(table.markdown(result["comparisons"], level).rstrip("\n"))
        lines.append("")
    lines += [f"skipped: {_skip_label(s)}: {s['reason']}" for s in result["skipped"]]
    lines += [f"note: {note}" for note in result["notes"]]
    lines.append(result["summary"]["line"])
    return "\n".join(lines) + "\n"


def _skip_label(s: dict) -> str:
    where = f" on {s['cell']} × {s['dataset']}" if s.get("cell") else ""
    return f"{s['candidate']} vs {s['baseline'] or 'none'}{where}"


def compare_runs(
    baseline: str | Path,
    candidate: str | Path,
    thresholds_dir: str | Path = "thresholds",
    model: str | None = None,
    partial: bool = False,
    level: float = 0.95,
    allow_unfinished: bool = False,
) -> dict:
    """Compare every order cell of the candidate run's models (or ``model``) with their baseline
    versions and gate them. Returns ``{"comparisons": [CellComparison.to_dict()], "skipped": [...],
    "summary": {...}, "baseline_run": identity, "candidate_run": identity}``; raises FlipgateError
    (IncomparableCell included) on bad or incomparable input, and on a run that did not finish
    unless ``allow_unfinished`` (then its cells are compared on the items both runs answered in
    full, and the summary says how many of how many items that is)."""
    from flipgate.config import load_thresholds
    from flipgate.regression.cell import gate_comparison
    from flipgate.regression.compare import compare_cell
    from flipgate.regression.plan import baseline_in

    base_run = RunRecord.open(baseline, role="baseline")
    cand_run = RunRecord.open(candidate, role="candidate")
    _refuse_same_run(base_run, cand_run)
    unfinished = _unfinished_runs(base_run, cand_run, allow_unfinished)
    version = cand_run.meta.get("grammar_version")
    if version is not None and version != GRAMMAR_VERSION:
        raise FlipgateError(
            f"candidate {cand_run.path}: run {cand_run.run_id} drew its orderings under grammar "
            f"version {version}; this flipgate uses grammar version {GRAMMAR_VERSION} "
            f"(re-run the candidate with this flipgate)"
        )
    seed = cand_run.meta.get("seed")
    if seed is None and cand_run.unfinished:  # it never recorded its seed: take the baseline's,
        seed = base_run.meta.get("seed")  # and let each cell's manifest sha256 tell them apart
    seed = DEFAULT_SEED if seed is None else seed
    base_run.check_grammar(seed, allow_unfinished)

    with_cells = sorted(m for m in cand_run.models if cand_run.order_cells(m))
    if model is not None and model not in with_cells:
        raise FlipgateError(
            f"option --candidate {model!r}: not a model of candidate run {cand_run.run_id} with "
            f"order cells (models: {', '.join(with_cells) or 'none'})"
        )
    if not with_cells:
        raise FlipgateError(
            f"candidate {cand_run.path}: run {cand_run.run_id} has no order-suite cell to compare "
            f"(models: {', '.join(sorted(cand_run.models))})"
        )
    comparisons, paired = [], {}
    skipped: list[dict[str, Any]] = []
    for cand in [model] if model else with_cells:
        declared = cand_run.models[cand].get("config", {}).get("baseline")
        base, why = baseline_in(base_run, cand, declared)
        if base is None:
            skipped.append(_skip(cand, None, None, None, str(why)))
            continue
        paired[cand] = (base, declared)
        name = f"{base}@{base_run.run_id}"
        skipped += [
            _skip(
                cand,
                name,
                cell,
                dataset,
                f"candidate run {cand_run.run_id} has no {cell} × {dataset} trials of {cand!r}, "
                "which the baseline has: not compared (not a pass)",
                _not_reached(cand_run, cand, cell, dataset, base_run.n_items(base, cell, dataset)),
            )
            for cell, dataset in base_run.order_cells(base)
            if (cell, dataset) not in cand_run.order_cells(cand)
        ]
        for cell, dataset in cand_run.order_cells(cand):
            base_arm = base_run.arm(base, cell, dataset)
            if base_arm is None:
                skipped.append(
                    _skip(
                        cand,
                        name,
                        cell,
                        dataset,
                        f"baseline run {base_run.run_id} has no {cell} × {dataset} trials of "
                        f"{base!r}: nothing to compare with (not a pass)",
                        _not_reached(
                            base_run, base, cell, dataset, cand_run.n_items(cand, cell, dataset)
                        ),
                    )
                )
                continue
            unmeasured = [
                f"{m}@{r.run_id}"
                for m, r in ((base, base_run), (cand, cand_run))
                if CellKey.parse(cell).is_control and r.floor_not_measured(m, cell, dataset)
            ]
            if unmeasured:  # Δ_order against a constructed floor: nothing to compare
                skipped.append(
                    _skip(
                        cand,
                        name,
                        cell,
                        dataset,
                        f"not applicable: the floor of {', '.join(unmeasured)} is "
                        f"{NOT_MEASURED_FLOOR} (docs/definitions.md §12.5)",
                        {"not_applicable": True},
                    )
                )
                continue
            cand_arm = cand_run.arm(cand, cell, dataset)
            assert cand_arm is not None  # one of the candidate's own cells
            comparison = compare_cell(
                base_arm,
                cand_arm,
                cell,
                dataset,
                cand_run.primary_readout(cand, cell),
                N_BOOT,
                level,
                seed,
                partial,
                unfinished=bool(unfinished),
            )
            comparison.baseline = name
            comparison.baseline_identity = base_run.identity(base)
            comparison.planned = cand_run.planned_pairs(cand, cell, dataset, base_arm)
            gate_comparison(comparison, load_thresholds(thresholds_dir, comparison.candidate))
            comparisons.append(comparison.to_dict())
    if not comparisons:
        raise FlipgateError(
            "nothing compared: " + "; ".join(f"{_skip_label(s)}: {s['reason']}" for s in skipped)
        )
    failed = [v for c in comparisons for v in c["verdicts"] if v["outcome"] == "fail"]
    regressions = sum(v["verdict"] == "fail" for v in failed)  # the violation test rejected
    other = len(failed) - regressions  # no estimate ("missing"), or not proven under rule: upper
    gated = sum(len(c["verdicts"]) for c in comparisons)
    not_applicable = sum(bool(s.get("not_applicable")) for s in skipped)
    not_reached = sum(bool(s.get("not_reached")) for s in skipped)
    coverage = _coverage(comparisons, skipped) if unfinished else None
    accepted = [
        f"{n} {what}"
        for n, what in ((not_applicable, "not applicable"), (not_reached, _NOT_REACHED))
        if n
    ]
    line = (
        (f"partial comparison, {coverage['items']} of {coverage['of']} items: " if coverage else "")
        + f"{len(comparisons)} cell{'s' * (len(comparisons) != 1)} compared, "
        f"{len(skipped)} skipped" + (f" ({', '.join(accepted)})" if accepted else "") + ", "
        f"{regressions} regression{'s' * (regressions != 1)}"
        + (
            f", {other} other failed threshold{'s' * (other != 1)} (no estimate, or not proven)"
            if other
            else ""
        )
        + (
            ""
            if gated
            else f"; no vs: baseline threshold in {thresholds_dir} applies (nothing gated)"
        )
    )
    return {
        "comparisons": comparisons,
        "skipped": skipped,
        "summary": {
            "compared": len(comparisons),
            "skipped": len(skipped),
            "not_applicable": not_applicable,
            "not_reached": not_reached,
            "regressions": regressions,
            "failed": len(failed),
            "verdicts": gated,
            "partial": coverage,
            "line": line,
        },
        "baseline_run": _run_identity(base_run),
        "candidate_run": _run_identity(cand_run),
        "notes": [
            f"{r.describe_end()}: a partial comparison, on the items both runs answered in full"
            for r in unfinished
        ]
        + pairing_notes(paired, base_run.run_id),
    }


#: how the summary line counts the cells an unfinished run never reached
_NOT_REACHED = "not reached by the unfinished run"


def _skip(
    cand: str,
    baseline: str | None,
    cell: str | None,
    dataset: str | None,
    reason: str,
    flags: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A cell (or a whole candidate, ``cell`` None) that was not compared, and why."""
    flags = flags or {}
    if flags.get("not_reached"):
        reason += "; its run stopped before this cell"
    return {
        "candidate": cand,
        "baseline": baseline,
        "cell": cell,
        "dataset": dataset,
        "reason": reason,
        **flags,
    }


def _not_reached(
    run: RunRecord, model: str, cell: str, dataset: str, items: int
) -> dict[str, Any] | None:
    """The flags of a cell that ``run`` lacks because it stopped before it: it did not finish and
    had planned the cell (its ``planned`` table); ``items``: what the other run holds of it. A cell
    it never planned stays an ordinary skip."""
    if not run.unfinished or not run.planned(model, cell, dataset):
        return None
    return {"not_reached": True, "items": items}


def _coverage(comparisons: list[dict], skipped: list[dict]) -> dict[str, int]:
    """How much of the cells either run holds a partial comparison covers: the items compared
    of every item of the compared cells and of the cells the unfinished run never reached."""
    overlaps = [c["overlap"] for c in comparisons]
    return {
        "items": sum(o["shared_items"] for o in overlaps),
        "of": sum(max(o["baseline_items"], o["candidate_items"]) for o in overlaps)
        + sum(s["items"] for s in skipped if s.get("not_reached")),
    }


def _unfinished_runs(base_run: RunRecord, cand_run: RunRecord, allow: bool) -> list[RunRecord]:
    """Those of the two runs that did not finish (:attr:`RunRecord.unfinished`), named in one
    line and refused unless ``allow``: the cells and items such a run never reached would read as
    skipped cells, as a pass on what it did reach, or (redrawn) as another grammar or seed. A run
    with no trial is refused whatever ``allow`` says: there is nothing to compare."""
    runs = (base_run, cand_run)
    empty = [r for r in runs if not r.n_trials]
    if empty:
        raise FlipgateError(
            "; ".join(
                f"{r.role} {r.path}: run {r.run_id} recorded 0 trials"
                + (f" (it {r.unfinished})" if r.unfinished else "")
                for r in empty
            )
            + ": nothing to compare; name a run that measured something"
        )
    unfinished = [r for r in runs if r.unfinished]
    if unfinished and not allow:
        raise FlipgateError(
            "; ".join(r.describe_end() for r in unfinished)
            + f": a comparison would cover only what {'they' if len(unfinished) > 1 else 'it'} "
            "recorded; pass --allow-unfinished to compare the items both runs answered in full"
        )
    return unfinished


def _refuse_same_run(base_run: RunRecord, cand_run: RunRecord) -> None:
    """Both sides one run (one store, or the run and its promoted copy): every model would be
    compared with its own trials, 0 regressions by construction."""
    same_store = base_run.path.resolve() == cand_run.path.resolve()
    run_id = cand_run.meta.get("run_id")
    if same_store or (run_id is not None and run_id == base_run.meta.get("run_id")):
        raise FlipgateError(
            f"baseline {base_run.path} and candidate {cand_run.path} are the same run "
            f"{cand_run.run_id}: each model would be compared with its own trials; name two "
            "different runs"
        )


def pairing_notes(paired: dict[str, tuple[str, str | None]], run_id: str) -> list[str]:
    """A line for each candidate compared with another model than its own id in the baseline run
    (candidate -> (baseline model, declared ``baseline:``)), and for each baseline model two or
    more candidates are compared with."""
    notes = []
    for cand, (base, declared) in sorted(paired.items()):
        if base == cand:
            continue
        if base == declared:
            notes.append(
                f"{cand} has no version in baseline run {run_id}: compared with {base}, the "
                "baseline: its models.yaml entry declares"
            )
        else:
            notes.append(
                f"{cand} has no counterpart in baseline run {run_id} (no model {cand!r}"
                f"{f' nor {declared!r}' if declared else ''}): compared with {base}, that run's "
                "only model"
            )
    by_base: dict[str, list[str]] = {}
    for cand, (base, _) in paired.items():
        by_base.setdefault(base, []).append(cand)
    notes += [
        f"{base}@{run_id} is the baseline of {len(cands)} candidate models: "
        f"{', '.join(sorted(cands))}"
        for base, cands in sorted(by_base.items())
        if len(cands) > 1
    ]
    return notes


def _run_identity(record: RunRecord) -> dict:
    meta = record.meta
    return {
        "run_id": record.run_id,
        "trials_store": str(record.path),
        "git_commit": meta.get("git_commit"),
        "date": meta.get("created"),
        "seed": meta.get("seed"),
        "grammar_version": meta.get("grammar_version"),
    }


# --------------------------------------------------------------------------------------- baseline


def _promote_parser() -> Parser:
    p = Parser(
        prog="python -m flipgate baseline",
        description="Promote a finished run to the baseline that later audits and `compare` use.",
    )
    p.add_argument(
        "run",
        nargs="?",
        default=None,
        metavar="RUN",
        help="run directory or its trials.sqlite (default: the latest run under --runs-dir)",
    )
    p.add_argument(
        "--runs-dir",
        default="reports/runs",
        metavar="DIR",
        help="where runs are (default: reports/runs)",
    )
    p.add_argument(
        "--to",
        default="reports/baseline",
        metavar="DIR",
        help="baseline directory to write (default: reports/baseline)",
    )
    return p


def promote_main(argv: list[str] | None = None) -> int:
    """``python -m flipgate baseline [RUN] ...``; returns the exit status."""
    return run_command(_promote, argv)


def latest_run(runs_dir: Path | str, exclude: Path | str | None = None) -> Path:
    """The run under ``runs_dir`` that started last, by the start time its trials store records
    (:func:`~flipgate.regression.runs.recorded_start`), not by its folder's name (``archive``
    sorts after every timestamp); ``exclude`` (the baseline directory) and folders whose store
    records no run start aside."""
    runs_dir = Path(runs_dir)
    skip = Path(exclude).resolve() if exclude is not None else None
    place = storage.Place("runs directory", "--runs-dir", "name the run to promote")
    with storage.guarded(place, runs_dir):
        stores = (
            [
                p / STORE_NAME
                for p in sorted(runs_dir.iterdir())
                if (p / STORE_NAME).is_file() and p.resolve() != skip
            ]
            if runs_dir.is_dir()
            else []
        )
    started = [(when, store.parent) for store in stores if (when := recorded_start(store))]
    if not started:
        why = (
            f"no {STORE_NAME} that records when its run started (in "
            f"{', '.join(s.parent.name for s in stores)})"
            if stores
            else f"no run directory with a {STORE_NAME}"
        )
        raise FlipgateError(
            f"no run to promote: {runs_dir} has {why} (run an audit first, or name the run)"
        )
    return max(started)[1]


def _promote(argv: list[str]) -> int:
    args = _promote_parser().parse_args(argv)
    source = Path(args.run) if args.run is not None else latest_run(args.runs_dir, args.to)
    record = RunRecord.open(source, role="run")
    to = Path(args.to)
    target = to / STORE_NAME
    if to.exists() and not to.is_dir():
        raise FlipgateError(f"option --to {str(to)!r}: not a directory")
    _refuse_foreign_folder(to)
    if target.exists() and target.resolve() == record.path.resolve():
        raise FlipgateError(f"run {record.path}: is already the baseline in {to}")
    run_dir, meta, models = record.path.parent, record.meta, sorted(record.models)
    n_trials = record.n_trials
    why = "recorded 0 trials" if not n_trials else record.unfinished
    if why is not None:
        raise FlipgateError(
            f"run {record.run_id} ({record.path}): it {why}: not promoted (a baseline it cannot "
            "compare with would skip every regression cell); promote a finished audit"
        )
    cells = trial_counts(record)
    with storage.guarded(BASELINE, target):
        to.mkdir(parents=True, exist_ok=True)
        _backup(record.store.conn, target)
        record.store.conn.close()
        cost = run_dir / COST_PROJECTION
        if cost.is_file():
            atomic_copy(cost, to / COST_PROJECTION)
        else:  # a previous baseline's projection would misdescribe it
            (to / COST_PROJECTION).unlink(missing_ok=True)
    per_model = {m: sum(c["trials"] for c in cells if c["model"] == m) for m in models}
    promoted = {
        "source": str(run_dir.resolve()),
        "trials_store": str(record.path.resolve()),
        "run_id": record.run_id,
        "promoted": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "flipgate_version": flipgate_version(),
        "run_flipgate_version": meta.get("flipgate_version"),
        "run_created": meta.get("created"),
        "git_commit": meta.get("git_commit"),
        "models": models,
        "trials": n_trials,
        "trials_per_model": per_model,
        "cells": cells,
    }
    storage.call(
        BASELINE,
        to / PROMOTED,
        lambda: atomic_write(to / PROMOTED, json.dumps(promoted, indent=2) + "\n"),
    )
    with_trials = {m: n for m, n in per_model.items() if n}  # not the envelope's configurations
    print(
        f"promoted run {record.run_id} ({record.path}) to {target}: "
        f"{_count(len(with_trials), 'model')} with trials "
        f"({', '.join(f'{m}: {n} trials' for m, n in with_trials.items())}), "
        f"{_count(len(cells), 'cell')}, {_count(n_trials, 'trial')}"
    )
    return OK


def _refuse_foreign_folder(to: Path) -> None:
    """``--to`` is written only when it is missing, empty, or a baseline ``flipgate baseline``
    wrote (its :data:`PROMOTED`): a run's own folder (its trials store) or a folder of other
    files is never overwritten."""
    if not to.is_dir() or (to / PROMOTED).is_file():
        return
    with storage.guarded(BASELINE, to):
        entries = sorted(p.name for p in to.iterdir())
    if not entries:
        return
    held = (
        f"a run's trials store ({STORE_NAME})"
        if STORE_NAME in entries
        else f"files or folders flipgate baseline did not write ({', '.join(entries[:3])}"
        f"{', ...' if len(entries) > 3 else ''})"
    )
    raise FlipgateError(
        f"option --to {str(to)!r}: {to} holds {held} and no {PROMOTED}, so it is not a baseline "
        "folder and nothing is promoted over it; name a new or empty folder, or a baseline "
        "folder (default reports/baseline)"
    )


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def flipgate_version() -> str:
    """The installed flipgate's version (its distribution's metadata; the package's own
    ``__version__`` when it runs from a checkout that is not installed)."""
    try:
        return importlib.metadata.version("flipgate")
    except importlib.metadata.PackageNotFoundError:
        return __version__


def trial_counts(record: RunRecord) -> list[dict]:
    """Every (model, cell, dataset) the run has trials of, with their number, in that order: the
    cells of a run's ``trials`` table (a facet, a control cell such as
    ``same_ordering:option_order``, or a suite's own cell)."""
    rows = record.store.conn.execute(
        "SELECT model_id, facet, dataset, COUNT(*) FROM trials "
        "GROUP BY model_id, facet, dataset ORDER BY model_id, facet, dataset"
    )
    return [{"model": m, "cell": c, "dataset": d, "trials": n} for m, c, d, n in rows]


def _backup(source: sqlite3.Connection, target: Path) -> None:
    """Copy a store with SQLite's backup API (what is still in its WAL included) into one
    self-contained file that atomically replaces ``target``."""

    def fill(tmp: Path) -> None:
        dest = sqlite3.connect(str(tmp))
        try:
            source.backup(dest)
            dest.execute("PRAGMA journal_mode=DELETE")  # one file: no -wal beside the baseline
            dest.commit()
        finally:
            dest.close()
        for side in (
            "-wal",
            "-shm",
            "-journal",
        ):  # a previous baseline's would be replayed onto the new file
            Path(f"{target}{side}").unlink(missing_ok=True)

    replace_with(target, fill)
