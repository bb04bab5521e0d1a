"""The transformers backend on a tiny random Llama built offline."""
import pytest

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
    cfg = {"id": "tiny", "backend": "hf", "source": {"path": str(tiny_model_dir)}, "batch_size": 4,
           "max_new_tokens": 3, "_cache_dir": str(tmp_path)}
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
    backend = HFBackend({"id": "tiny", "backend": "hf", "source": {"path": str(tiny_model_dir)},
                         "readouts": ["letter_logprob"], "_cache_dir": str(tmp_path)})
    outs = backend.complete(requests()[:2])
    assert outs[0].text == "" and outs[0].tokens_out == 0 and len(outs[0].label_logprobs) == 4


def test_plain_prompt_when_tokenizer_has_no_chat_template(tiny_model_dir, tmp_path):
    backend = HFBackend({"id": "tiny", "backend": "hf", "source": {"path": str(tiny_model_dir)},
                         "_cache_dir": str(tmp_path)})
    text = backend.render(Request((("user", "hi"),), "Answer:", ("A", "B")))
    assert text == "User: hi\nAssistant: Answer:"


def test_missing_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(FlipgateError, match="source.path .* does not exist"):
        HFBackend({"id": "x", "backend": "hf", "source": {"path": str(tmp_path / "nope")}})


def test_missing_package_is_a_clear_error():
    with pytest.raises(FlipgateError, match="source.package 'no_such_pkg' is not installed"):
        HFBackend({"id": "x", "backend": "hf", "source": {"package": "no_such_pkg"}})
