"""Hub loaders for the mixed-modality RAG datasets of mixed_modality_order
(docs/definitions.md §3.5; Facet-Probe §3): MRAMG-Recipe, MMDocRAG and MultiModalQA.

Each is a join of a questions file with text / table / image corpora, so ``datasets.load_dataset``
on one file is not enough: the upstream files are fetched with ``huggingface_hub.hf_hub_download``,
or read from ``data_dir``, a local mirror holding them under their upstream names (how users audit a
mirrored copy and how the project tests them offline). ``images`` points at the image files (the
upstream zip or its extracted folder) when they are elsewhere.

Every item carries ``meta["components"]``: ("text", i) / ("image", j) pairs in SOURCE order, ``i``
into ``item.passages`` and ``j`` into ``item.images`` (the structure ``shapes.generate_mixed``
builds). Tables become text passages ("col | col" lines, the table title as ``Passage.title``).
Images are encoded bytes: JPEG/PNG as shipped, other formats re-encoded as PNG. An item whose image
cannot be found or decoded is skipped, and the skips are reported with ``warnings.warn``; a row
missing a required field is an error naming the file, row and field.
"""

from __future__ import annotations

import ast
import io
import json
import warnings
import zipfile
from pathlib import Path

from flipgate import FlipgateError
from flipgate.items.hub import _image_bytes, records
from flipgate.items.item import Item, Passage, require
from flipgate.items.validate import RowItems

MRAMG_HUB = "MRAMG/MRAMG-Bench"
MMDOCRAG_HUB = "MMDocIR/MMDocRAG"
MMQA_HUB = "TableQAKit/MMQA"
MMQA_IMAGES_URL = "https://multimodalqa-images.s3-us-west-2.amazonaws.com/final_dataset_images/final_dataset_images.zip"


# --- sources -----------------------------------------------------------------------------------


def _source(repo_id: str, names: tuple[str, ...], data_dir, revision: str | None) -> Path:
    """The first of ``names`` present in ``data_dir``, else ``names[0]`` fetched from hub dataset
    ``repo_id``."""
    if data_dir is not None:
        for name in names:
            if (Path(data_dir) / name).is_file():
                return Path(data_dir) / name
        raise FlipgateError(
            f"{repo_id}: file {' or '.join(map(repr, names))} not found in data_dir {data_dir}"
        )
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo_id, names[0], repo_type="dataset", revision=revision))
    except Exception as exc:  # network, auth, missing file: the user needs which file failed
        raise FlipgateError(
            f"could not download {names[0]!r} from hub dataset {repo_id!r} "
            f"(revision {revision or 'main'}): {exc}"
        ) from exc


def _index(path: Path, wanted: set[str] | None = None) -> dict[str, dict]:
    """Records of ``path`` by their ``id`` field (only the ``wanted`` ids, when given)."""
    out = {}
    for i, rec in enumerate(records(path)):
        (rid,) = require(rec, ["id"], f"{path} row {i}")
        if wanted is None or str(rid) in wanted:
            out[str(rid)] = rec
    return out


def _image_root(images, data_dir, archive: str, fetch) -> Path:
    """Where the image files are: ``images`` (a folder or zip), else ``data_dir/archive`` or
    ``data_dir`` itself (an extracted copy), else ``fetch()``."""
    if images is not None:
        if not Path(images).exists():
            raise FlipgateError(
                f"images path {images} does not exist (expected {archive} or its extracted folder)"
            )
        return Path(images)
    if data_dir is not None:
        zipped = Path(data_dir) / archive
        return zipped if zipped.is_file() else Path(data_dir)
    return fetch()


class _ImageFiles:
    """Files by relative name under a folder or inside a zip archive, tried under each of
    ``prefixes``."""

    def __init__(self, root: Path, prefixes: tuple[str, ...] = ("",)):
        self.root, self.prefixes = root, prefixes
        try:
            self.zip = zipfile.ZipFile(root) if root.is_file() else None
        except (OSError, zipfile.BadZipFile) as exc:
            raise FlipgateError(f"cannot open image archive {root}: {exc}") from exc

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.zip is not None:
            self.zip.close()

    def read(self, *names: str) -> bytes | None:
        for name in names:
            for prefix in self.prefixes:
                full = prefix + name.lstrip("/")
                if self.zip is not None:
                    try:
                        return self.zip.read(full)
                    except KeyError:
                        continue
                elif (self.root / full).is_file():
                    return (self.root / full).read_bytes()
        return None


def _decoded(raw: bytes | None, where: str) -> bytes | None:
    """``raw`` when it decodes as JPEG/PNG, a PNG re-encoding for other formats, None when it does
    not decode."""
    if raw is None:
        return None
    from PIL import Image

    try:
        img = Image.open(io.BytesIO(raw))
        img.load()
    except Exception:  # PIL raises many types (UnidentifiedImageError, OSError, SyntaxError, ...)
        return None
    return raw if img.format in ("JPEG", "PNG") else _image_bytes(img, where)


# --- items -------------------------------------------------------------------------------------


class _Components:
    """Passages and images in source order, with the ("text", i) / ("image", j) pairs and missing
    images."""

    def __init__(self):
        self.passages, self.images, self.order, self.missing = [], [], [], []

    def text(self, passage: Passage) -> None:
        self.order.append(("text", len(self.passages)))
        self.passages.append(passage)

    def image(self, data: bytes | None, name) -> None:
        if data is None:
            self.missing.append(str(name))
            return
        self.order.append(("image", len(self.images)))
        self.images.append(data)

    def item(
        self, dataset: str, upstream_id, question: str, answers: list[str], meta: dict
    ) -> Item:
        return Item(
            f"{dataset}/{upstream_id}",
            dataset,
            question,
            passages=tuple(self.passages),
            answer=answers[0],
            aliases=tuple(answers[1:]),
            images=tuple(self.images),
            meta={**meta, "components": tuple(self.order)},
        )


def _warn_skipped(dataset: str, skipped: list[str], total: int) -> None:
    if skipped:
        warnings.warn(
            f"{dataset}: skipped {len(skipped)} of {total} items whose images could not be loaded "
            f"(e.g. {', '.join(skipped[:5])})",
            stacklevel=3,
        )


# --- MRAMG-Bench -------------------------------------------------------------------------------


def _mramg_docs(path: Path) -> dict[str, tuple[str, list]]:
    """doc_<domain>.jsonl: one JSON array [id, content, images_list] per line (an object with those
    field names is accepted too); the k-th <PIC> in content is images_list[k]."""
    docs = {}
    for i, rec in enumerate(records(path)):
        if isinstance(rec, dict):
            rec = [rec.get("id"), rec.get("content"), rec.get("images_list")]
        if (
            not isinstance(rec, list)
            or len(rec) < 2
            or rec[0] is None
            or not isinstance(rec[1], str)
        ):
            raise FlipgateError(
                f"{path} row {i}: expected [id, content, images_list] (value: {str(rec)[:80]!r})"
            )
        docs[str(rec[0])] = (rec[1], list(rec[2] or []) if len(rec) > 2 else [])
    return docs


def _mramg_image_info(files: _ImageFiles, domain: str) -> dict:
    """images_info/<domain>_imgs_collection.json: image id -> {image_path, image_caption}, {} when
    absent."""
    name = f"images_info/{domain}_imgs_collection.json"
    raw = files.read(name)
    try:
        return json.loads(raw) if raw is not None else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FlipgateError(f"{files.root}: {name} is not valid JSON ({exc})") from exc


def load_mramg_recipe(
    dataset: str,
    split: str = "test",
    data_dir=None,
    revision=None,
    images=None,
    domain: str = "recipe",
) -> list[Item]:
    """MRAMG/MRAMG-Bench, Recipe domain. ``recipe_mqa.jsonl``: id, question, ground_truth (the
    answer paragraph), images_list (the gold answer's image ids), provenance (source document ids);
    ``doc_recipe.jsonl``: [id, content with a <PIC> per image, images_list]; ``IMAGE.zip``:
    IMAGE/images/RECIPE/<image_path> and IMAGE/images_info/recipe_imgs_collection.json (id ->
    image_path, image_caption). Components: each provenance document's text segments and images in
    document order. ``split`` only labels messages (the domain has one question file)."""
    qa_path = _source(MRAMG_HUB, (f"{domain}_mqa.jsonl",), data_dir, revision)
    doc_path = _source(MRAMG_HUB, (f"doc_{domain}.jsonl",), data_dir, revision)
    docs = _mramg_docs(doc_path)
    root = _image_root(
        images, data_dir, "IMAGE.zip", lambda: _source(MRAMG_HUB, ("IMAGE.zip",), None, revision)
    )
    items, skipped, total = RowItems("id"), [], 0
    with _ImageFiles(root, ("IMAGE/", "IMAGE/IMAGE/", "")) as files:
        info = _mramg_image_info(files, domain)
        for i, row in enumerate(records(qa_path)):
            total += 1
            where = f"{qa_path} [{split}] row {i}"
            question, answer, provenance = require(
                row, ["question", "ground_truth", "provenance"], where
            )
            doc_ids = provenance if isinstance(provenance, list) else [provenance]
            comps, image_ids = _Components(), []
            for doc_id in doc_ids:
                if str(doc_id) not in docs:
                    raise FlipgateError(
                        f"{where}: field 'provenance' value {doc_id!r} is not a document in "
                        f"{doc_path}"
                    )
                content, doc_images = docs[str(doc_id)]
                segments = content.split("<PIC>")
                for k, segment in enumerate(segments):
                    if segment.strip():
                        comps.text(Passage(segment.strip()))
                    if k < len(segments) - 1:
                        name = (
                            doc_images[k]
                            if k < len(doc_images)
                            else f"<PIC> {k} of document {doc_id}"
                        )
                        path = (info.get(str(name)) or {}).get("image_path") or f"{name}.jpg"
                        comps.image(
                            _decoded(files.read(f"images/{domain.upper()}/{path}"), where), name
                        )
                        image_ids.append(str(name))
            qid = row.get("id", i)
            if comps.missing:
                skipped.append(str(qid))
                continue
            items.add(
                comps.item(
                    dataset,
                    qid,
                    question,
                    [str(answer)],
                    {
                        "domain": domain,
                        "provenance": tuple(doc_ids),
                        "gold_images": tuple(row.get("images_list") or ()),
                        "image_ids": tuple(image_ids),
                        "image_captions": tuple(
                            (info.get(n) or {}).get("image_caption") for n in image_ids
                        ),
                    },
                ),
                where,
                i,
            )
    _warn_skipped(dataset, skipped, total)
    return items.items


# --- MMDocRAG ----------------------------------------------------------------------------------


def _short_answer(value) -> str:
    """answer_short as text; a stringified list ("['46', '27']") is joined with ", "."""
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            parts = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
        if isinstance(parts, list):
            return ", ".join(str(p) for p in parts)
    return text


def _mmdocrag_answer(row: dict, where: str) -> str:
    """answer_short, or answer_interleaved where the short form is empty."""
    short, long = row.get("answer_short"), row.get("answer_interleaved")
    for value in (short, long):
        if value is not None and str(value).strip():
            return _short_answer(value)
    raise FlipgateError(
        f"{where}: required field 'answer_short' is missing or empty (value: {short!r}), "
        f"and so is 'answer_interleaved'"
    )


def load_mmdocrag(
    dataset: str, split: str = "dev", data_dir=None, revision=None, images=None, quotes: int = 15
) -> list[Item]:
    """MMDocIR/MMDocRAG: ``{split}_{quotes}.jsonl`` (split dev or evaluation, 15 or 20 quotes):
    q_id, doc_name, domain, question, question_type, evidence_modality_type, text_quotes [{quote_id,
    type, text, page_id, layout_id}], img_quotes [{quote_id, type, img_path, img_description,
    page_id, layout_id}], gold_quotes, answer_short, answer_interleaved; ``images.zip`` holds the
    img_path files (images/<name>.jpg). Components: the text quotes, then the image quotes (charts,
    tables, figures), as the upstream inference prompt orders them. ``answer`` is answer_short;
    answer_interleaved goes to meta."""
    qa_path = _source(MMDOCRAG_HUB, (f"{split}_{quotes}.jsonl",), data_dir, revision)
    root = _image_root(
        images,
        data_dir,
        "images.zip",
        lambda: _source(MMDOCRAG_HUB, ("images.zip",), None, revision),
    )
    items, skipped, total = RowItems("q_id"), [], 0
    with _ImageFiles(root) as files:
        for i, row in enumerate(records(qa_path)):
            total += 1
            where = f"{qa_path} [{split}] row {i}"
            question, text_quotes, img_quotes = require(
                row, ["question", "text_quotes", "img_quotes"], where
            )
            answer = _mmdocrag_answer(row, where)
            gold = set(row.get("gold_quotes") or ())
            comps, quote_ids = _Components(), []
            for k, quote in enumerate(text_quotes):
                (text,) = require(quote, ["text"], f"{where} text_quotes[{k}]")
                comps.text(Passage(str(text).strip(), supporting=quote.get("quote_id") in gold))
                quote_ids.append(quote.get("quote_id"))
            for k, quote in enumerate(img_quotes):
                (img_path,) = require(quote, ["img_path"], f"{where} img_quotes[{k}]")
                raw = files.read(img_path, f"images/{Path(img_path).name}")
                comps.image(_decoded(raw, where), img_path)
                quote_ids.append(quote.get("quote_id"))
            qid = row.get("q_id", i)
            if comps.missing:
                skipped.append(str(qid))
                continue
            items.add(
                comps.item(
                    dataset,
                    qid,
                    question,
                    [answer],
                    {
                        "doc_name": row.get("doc_name"),
                        "domain": row.get("domain"),
                        "question_type": row.get("question_type"),
                        "evidence_modality_type": tuple(row.get("evidence_modality_type") or ()),
                        "gold_quotes": tuple(row.get("gold_quotes") or ()),
                        "quote_ids": tuple(quote_ids),
                        "image_descriptions": tuple(q.get("img_description") for q in img_quotes),
                        "answer_interleaved": row.get("answer_interleaved"),
                    },
                ),
                where,
                i,
            )
    _warn_skipped(dataset, skipped, total)
    return items.items


# --- MultiModalQA ------------------------------------------------------------------------------


def _table_passage(doc: dict, where: str, supporting: bool) -> Passage:
    """A MMQA_tables record as text: the header and each row as "cell | cell" lines."""
    (table,) = require(doc, ["table"], where)
    header = [str(h.get("column_name", "")) for h in table.get("header") or []]
    rows = [[str(cell.get("text", "")) for cell in row] for row in table.get("table_rows") or []]
    lines = [" | ".join(cells) for cells in [header, *rows] if any(c.strip() for c in cells)]
    title = " - ".join(t for t in (doc.get("title"), table.get("table_name")) if t)
    return Passage("\n".join(lines), title, supporting)


def _mmqa_answers(row: dict, where: str) -> list[str]:
    """Every gold answer string, in order, without repeats (an answer is {answer, type, modality,
    ...})."""
    (answers,) = require(row, ["answers"], where)
    out = []
    for k, ans in enumerate(answers):
        (text,) = require(
            ans if isinstance(ans, dict) else {"answer": ans}, ["answer"], f"{where} answers[{k}]"
        )
        if str(text) not in out:
            out.append(str(text))
    return out


def _mmqa_doc(corpora: dict, kind: str, doc_id, where: str) -> dict:
    """The ``kind`` corpus record ``doc_id`` (texts, tables); an id the corpus lacks is an error."""
    source, index = corpora[kind]
    if str(doc_id) not in index:
        raise FlipgateError(f"{where}: metadata value {doc_id!r} is not an id in {source}")
    return index[str(doc_id)]


def _mmqa_images_root(images, data_dir) -> Path:
    """The MMQA image files: ``images``, else final_dataset_images(.zip) in ``data_dir``; no hub
    copy."""

    def missing() -> Path:
        raise FlipgateError(
            f"MultiModalQA images are not on the hub: download {MMQA_IMAGES_URL} and pass "
            f"images=<that zip or its extracted final_dataset_images folder>"
        )

    return _image_root(images, data_dir, "final_dataset_images.zip", missing)


def load_multimodalqa(
    dataset: str,
    split: str = "dev",
    data_dir=None,
    revision=None,
    images=None,
    hub_id: str = MMQA_HUB,
) -> list[Item]:
    """MultiModalQA (allenai/multimodalqa; hub mirror TableQAKit/MMQA). ``MMQA_{split}.jsonl.gz``:
    qid, question, answers [{answer, type, modality, ...}], metadata {type, modalities,
    text_doc_ids, image_doc_ids, table_id}, supporting_context [{doc_id, doc_part}]; joined with
    ``MMQA_texts.jsonl.gz`` {id, title, url, text}, ``MMQA_tables.jsonl.gz`` {id, title, url, table
    {table_name, header [{column_name}], table_rows [[{text, links}]]}} and ``MMQA_images.jsonl.gz``
    {id, title, url, path}. The image files (final_dataset_images.zip from the MultiModalQA S3
    bucket, not on the hub) are ``images`` or sit in ``data_dir``. Components: the text docs, the
    table, then the images. ``answer`` is the first gold answer, the others are aliases."""

    def path(kind: str) -> Path:
        return _source(hub_id, (f"MMQA_{kind}.jsonl.gz", f"MMQA_{kind}.jsonl"), data_dir, revision)

    qa_path = path(split)
    rows = list(records(qa_path))
    metas = [r["metadata"] for r in rows if isinstance(r.get("metadata"), dict)]
    wanted = {
        str(d) for m in metas for key in ("text_doc_ids", "image_doc_ids") for d in m.get(key) or ()
    }
    wanted |= {str(m.get("table_id")) for m in metas}
    root = _mmqa_images_root(images, data_dir)
    sources = {kind: path(kind) for kind in ("texts", "tables", "images")}
    corpora = {kind: (source, _index(source, wanted)) for kind, source in sources.items()}
    items, skipped = RowItems("qid"), []
    with _ImageFiles(root, ("", "final_dataset_images/")) as files:
        for i, row in enumerate(rows):
            where = f"{qa_path} [{split}] row {i}"
            question, meta = require(row, ["question", "metadata"], where)
            answers = _mmqa_answers(row, where)
            gold = {str(c.get("doc_id")) for c in row.get("supporting_context") or ()}
            comps = _Components()
            for doc_id in meta.get("text_doc_ids") or ():
                text = _mmqa_doc(corpora, "texts", doc_id, where)
                comps.text(
                    Passage(
                        str(text.get("text") or "").strip(),
                        text.get("title") or "",
                        str(doc_id) in gold,
                    )
                )
            if meta.get("table_id"):
                table_id = str(meta["table_id"])
                table = _mmqa_doc(corpora, "tables", table_id, where)
                comps.text(
                    _table_passage(table, f"{sources['tables']} id {table_id}", table_id in gold)
                )
            image_docs = [
                corpora["images"][1].get(str(d)) or {"id": d}
                for d in meta.get("image_doc_ids") or ()
            ]
            for image in image_docs:
                raw = files.read(image["path"]) if image.get("path") else None
                comps.image(_decoded(raw, where), image["id"])
            qid = row.get("qid", i)
            if comps.missing:
                skipped.append(str(qid))
                continue
            items.add(
                comps.item(
                    dataset,
                    qid,
                    question,
                    answers,
                    {
                        "type": meta.get("type"),
                        "modalities": tuple(meta.get("modalities") or ()),
                        "gold_doc_ids": tuple(sorted(gold)),
                        "answer_modality": tuple(
                            a.get("modality") for a in row["answers"] if isinstance(a, dict)
                        ),
                        "image_titles": tuple(im.get("title") for im in image_docs),
                    },
                ),
                where,
                i,
            )
    _warn_skipped(dataset, skipped, len(rows))
    return items.items
