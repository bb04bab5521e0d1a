"""TruthfulQA-MC and BBQ-lite, read straight out of a local copy of the ``bigbench`` 1.0.0 sdist:
optional datasets, for a user who has that file.

Only ``bigbench==1.0.0`` shipped the task data (the 0.0.1 sdist is 350 kB of code), and the package
index no longer serves it (it answers 403), so flipgate never downloads it and no shipped suite's
defaults read it. A user who has the file points at it with ``FLIPGATE_BIGBENCH_SDIST`` (or the
``sdist:`` option of a dataset entry); a copy already in ``bigbench/`` of flipgate's per-user cache
(:func:`flipgate.files.user_cache_dir`, where earlier versions downloaded it) is read too. The file
is checked against the sdist's sha256 before it is read; it is never installed or vendored.

Internal paths (under the ``bigbench-1.0.0/`` top folder):

- ``bigbench/benchmark_tasks/truthful_qa/task_mc.json``: examples ``{input, target_scores}`` with
  exactly one option scored 1 (MC1); ``questions.json`` alongside gives each question's Category.
- ``bigbench/benchmark_tasks/bbq_lite_json/<subtask>/task.json``: examples ``{input, target_scores,
  comment: {example_id, question_index, category, question_polarity, context_condition}}``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tarfile
from pathlib import Path
from typing import Any, Iterable

from flipgate import FlipgateError
from flipgate.files import user_cache_dir
from flipgate.hashing import sha256_file
from flipgate.items.item import Item, require, with_shuffled_options
from flipgate.items.validate import RowItems

BIGBENCH_VERSION = "1.0.0"
SDIST_NAME = f"bigbench-{BIGBENCH_VERSION}.tar.gz"
SDIST_SHA256 = "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2"
SDIST_ENV = "FLIPGATE_BIGBENCH_SDIST"


def default_cache_dir() -> Path:
    """Where a copy is looked for unless told: ``<user cache>/bigbench``."""
    return user_cache_dir() / "bigbench"


TASKS = "bigbench/benchmark_tasks/"
TRUTHFULQA_MC = TASKS + "truthful_qa/task_mc.json"
TRUTHFULQA_QUESTIONS = TASKS + "truthful_qa/questions.json"
BBQ_LITE = TASKS + "bbq_lite_json/"

# The "unknown" answer strings of BBQ (every bbq_lite_json example has exactly one among its
# options; it is the gold answer of every *_ambig example).
BBQ_UNKNOWN = frozenset(
    {
        "Unknown",
        "Cannot be determined",
        "Can't be determined",
        "Not answerable",
        "Not known",
        "Not enough info",
        "Not enough information",
        "Cannot answer",
        "Can't answer",
        "Undetermined",
    }
)


# ---------------------------------------------------------------------------------------------
# locating the sdist


def _checked(path: Path, where: str) -> Path:
    """``path`` if it is a file with the sdist's sha256 (memoised by size and mtime)."""
    if not path.is_file():
        raise FlipgateError(f"{where}: {path} does not name an existing file ({SDIST_NAME})")
    digest = sha256_file(path)
    if digest != SDIST_SHA256:
        raise FlipgateError(
            f"{where}: {path} has sha256 {digest}, not that of {SDIST_NAME} ({SDIST_SHA256})"
        )
    return path


def locate_sdist(
    sdist: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    dataset: str = "bigbench",
) -> Path:
    """The bigbench sdist: ``sdist`` if given, else ``$FLIPGATE_BIGBENCH_SDIST``, else a copy in
    ``<cache_dir>/``; each checked against :data:`SDIST_SHA256`. Never downloaded (module
    docstring)."""
    if sdist is not None:
        return _checked(Path(sdist), f"dataset {dataset!r}: field 'sdist'")
    if os.environ.get(SDIST_ENV):
        return _checked(Path(os.environ[SDIST_ENV]), SDIST_ENV)
    path = Path(cache_dir or default_cache_dir()) / SDIST_NAME
    if path.is_file():
        return _checked(path, f"dataset {dataset!r}")
    raise FlipgateError(
        f"dataset {dataset!r} reads the bigbench {BIGBENCH_VERSION} sdist, which no package index "
        f"serves any more (pip offers bigbench 0.0.1, without the task data): set {SDIST_ENV} to "
        f"a local copy of {SDIST_NAME} (sha256 {SDIST_SHA256[:12]}...), or audit a dataset a "
        f"package ships (docs/suites/envelope.md, 'Benchmarks')"
    )


def _task_path(member_name: str) -> str | None:
    """``bigbench-1.0.0/bigbench/benchmark_tasks/x/task.json`` ->
    ``bigbench/benchmark_tasks/x/task.json``."""
    _, _, rest = member_name.partition("/")
    wanted = rest.startswith((TASKS + "truthful_qa/", BBQ_LITE)) and rest.endswith(".json")
    return rest if wanted else None


@functools.lru_cache(maxsize=4)
def _task_files(path: str, size: int, mtime: float) -> dict[str, bytes]:
    """The truthful_qa and bbq_lite_json JSON files of the sdist at ``path``, in one streaming pass
    (keyed by size and mtime so a replaced file is re-read)."""
    files = {}
    try:
        with tarfile.open(path, "r|gz") as tar:
            for member in tar:
                name = _task_path(member.name) if member.isfile() else None
                if name is not None:
                    data = tar.extractfile(member)
                    assert data is not None  # a regular file (member.isfile())
                    files[name] = data.read()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise FlipgateError(f"could not read the bigbench sdist {path}: {exc}") from exc
    return files


def task_files(
    sdist: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    dataset: str = "bigbench",
) -> tuple[Path, dict[str, bytes]]:
    path = locate_sdist(sdist, cache_dir, dataset)
    stat = path.stat()
    return path, _task_files(str(path.resolve()), stat.st_size, stat.st_mtime)


def _json(path: Path, files: dict[str, bytes], name: str) -> Any:
    if name not in files:
        raise FlipgateError(
            f"{path} has no member */{name} (is it the bigbench {BIGBENCH_VERSION} sdist?)"
        )
    try:
        return json.loads(files[name])
    except ValueError as exc:
        raise FlipgateError(f"{path} [{name}]: not valid JSON: {exc}") from exc


def _examples(path: Path, files: dict[str, bytes], name: str) -> list:
    data = _json(path, files, name)
    examples = data.get("examples") if isinstance(data, dict) else None
    if not isinstance(examples, list):
        raise FlipgateError(f"{path} [{name}]: required field 'examples' is missing or not a list")
    return examples


def _single_correct(example: Any, where: str) -> tuple[str, list[str], int]:
    """(input, options in source order, gold index) of a target_scores example with one option
    scored 1."""
    question, scores = require(
        example if isinstance(example, dict) else {}, ["input", "target_scores"], where
    )
    if not isinstance(scores, dict) or len(scores) < 2:
        raise FlipgateError(
            f"{where}: field 'target_scores' must map >= 2 options to scores "
            f"(value: {scores!r:.80})"
        )
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in scores.values()):
        raise FlipgateError(
            f"{where}: field 'target_scores' has a non-numeric score (value: {scores!r:.80})"
        )
    options = list(scores)
    gold = [j for j, v in enumerate(scores.values()) if v == 1]
    if len(gold) != 1 or sum(1 for v in scores.values() if v != 0) != 1:
        raise FlipgateError(
            f"{where}: field 'target_scores' must score exactly one option 1 and the rest 0 "
            f"(value: {scores!r:.120})"
        )
    return question, options, gold[0]


# ---------------------------------------------------------------------------------------------
# loaders


def load_truthfulqa_mc(
    dataset: str,
    sdist: str | None = None,
    cache_dir: str | None = None,
    shuffle_options: bool = True,
) -> list[Item]:
    """BIG-bench truthful_qa/task_mc.json (MC1: one true answer among 2–5 options), ids
    ``<dataset>/<example index>``. BIG-bench lists the true answer first; ``shuffle_options``
    (default) puts the options in a fixed id-seeded order (see :func:`with_shuffled_options`). meta:
    category (joined from questions.json by question text), source."""
    path, files = task_files(sdist, cache_dir, dataset)
    examples = _examples(path, files, TRUTHFULQA_MC)
    categories = {}
    if TRUTHFULQA_QUESTIONS in files:
        for q in _examples(path, files, TRUTHFULQA_QUESTIONS):
            if isinstance(q, dict) and q.get("Question"):
                categories[q["Question"]] = q.get("Category")
    items = RowItems("row", "target_scores", "target_scores")
    for i, example in enumerate(examples):
        where = f"{path} [{TRUTHFULQA_MC}] row {i}"
        question, options, gold = _single_correct(example, where)
        item = Item(
            f"{dataset}/{i}",
            dataset,
            question,
            tuple(options),
            gold,
            {"category": categories.get(question), "source": f"bigbench {BIGBENCH_VERSION}"},
        )
        items.add(item, where, i)
    return [with_shuffled_options(it) if shuffle_options else it for it in items.items]


def bbq_subtasks(files: dict[str, bytes]) -> list[str]:
    """Subtask folder names under bbq_lite_json/, sorted (age_ambig, age_disambig, ...)."""
    names = {
        n[len(BBQ_LITE) :].split("/")[0]
        for n in files
        if n.startswith(BBQ_LITE)
        and n.endswith("/task.json")
        and n.count("/") == BBQ_LITE.count("/") + 1
    }
    return sorted(names)


def _subtask_list(subtasks: str | Iterable[str] | None, known: list[str], path: Path) -> list[str]:
    if subtasks is None:
        return known
    chosen = (
        [s.strip() for s in subtasks.split(",")]
        if isinstance(subtasks, str)
        else [str(s) for s in subtasks]
    )
    chosen = [s for s in chosen if s]
    unknown = [s for s in chosen if s not in known]
    if unknown or not chosen:
        raise FlipgateError(
            f"bbq_lite: unknown subtask(s) {unknown or chosen!r} in {path}; "
            f"known: {', '.join(known)}"
        )
    return list(dict.fromkeys(chosen))


def load_bbq_lite(
    dataset: str,
    subtasks: str | Iterable[str] | None = None,
    sdist: str | None = None,
    cache_dir: str | None = None,
) -> list[Item]:
    """BIG-bench bbq_lite_json: every subtask (``<category>_ambig`` / ``<category>_disambig``) or
    those named in ``subtasks`` (a list or a comma-separated string). 3 options in source order, the
    one scored 1 is gold. Ids ``<dataset>/<subtask>/<comment.example_id>``. meta: subtask, category,
    ambiguity (context_condition), question_polarity, question_index, example_id, unknown_option
    (index of the "unknown" answer, which is gold in every ambiguous item)."""
    path, files = task_files(sdist, cache_dir, dataset)
    known = bbq_subtasks(files)
    if not known:
        raise FlipgateError(f"{path} has no {BBQ_LITE}<subtask>/task.json members")
    items = RowItems("comment.example_id", "target_scores", "target_scores")
    for subtask in _subtask_list(subtasks, known, path):
        name = f"{BBQ_LITE}{subtask}/task.json"
        for i, example in enumerate(_examples(path, files, name)):
            where = f"{path} [{name}] row {i}"
            question, options, gold = _single_correct(example, where)
            comment = example.get("comment") if isinstance(example.get("comment"), dict) else {}
            example_id = comment.get("example_id", i)
            unknown = [j for j, o in enumerate(options) if o in BBQ_UNKNOWN]
            items.add(
                Item(
                    f"{dataset}/{subtask}/{example_id}",
                    dataset,
                    question,
                    tuple(options),
                    gold,
                    {
                        "subtask": subtask,
                        "category": comment.get("category"),
                        "ambiguity": comment.get("context_condition") or subtask.rsplit("_", 1)[-1],
                        "question_polarity": comment.get("question_polarity"),
                        "question_index": comment.get("question_index"),
                        "example_id": example_id,
                        "unknown_option": unknown[0] if len(unknown) == 1 else None,
                    },
                ),
                where,
                i,
            )
    return items.items


# ---------------------------------------------------------------------------------------------
# setup entry point


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m flipgate.items.bigbench",
        description=f"check a local copy of the bigbench {BIGBENCH_VERSION} sdist ({SDIST_ENV})",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="where else to look for it (default: bigbench/ in the per-user cache)",
    )
    parser.add_argument(
        "--summary", action="store_true", help="print the item counts the loaders see"
    )
    args = parser.parse_args(argv)
    if not args.summary:
        parser.error("nothing to do: pass --summary")
    try:
        tqa = load_truthfulqa_mc("truthfulqa_mc", cache_dir=args.cache_dir)
        bbq = load_bbq_lite("bbq_lite", cache_dir=args.cache_dir)
        print(f"truthfulqa_mc: {len(tqa)} items")
        counts: dict[str, int] = {}
        for item in bbq:
            counts[item.meta["subtask"]] = counts.get(item.meta["subtask"], 0) + 1
        print(f"bbq_lite: {len(bbq)} items in {len(counts)} subtasks")
        for subtask, count in counts.items():
            print(f"  {subtask}: {count}")
    except FlipgateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
