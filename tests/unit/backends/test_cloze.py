"""The cloze readout: the engine's continuation scores against a whole-sequence forward pass on a
tiny random Llama, and the readout's argmax."""

from dataclasses import replace

import pytest
import torch
from support.tiny_models import tiny_hf_config

from flipgate.axes import get_axis
from flipgate.backends.base import Output
from flipgate.backends.hf import HFBackend
from flipgate.items import Item
from flipgate.readouts import read_label

ITEM = Item("t/1", "t", "Which is a fruit?", ("a red car", "an apple", "rock", "the chair"), 1)


def naive_scores(backend: HFBackend, request) -> dict[str, float]:
    """Each continuation appended to the whole prompt, one forward pass per pair."""
    prompt = backend.tokenizer(backend.render(request), add_special_tokens=False)["input_ids"]
    out = {}
    for label, text in zip(request.labels, request.continuations):
        cont = backend.tokenizer(" " + text, add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            logits = backend.model(input_ids=torch.tensor([prompt + cont])).logits[0]
        logp = torch.log_softmax(logits.float(), -1)
        picked = [logp[len(prompt) - 1 + j, t] for j, t in enumerate(cont)]
        out[label] = float(sum(picked) / len(cont))
    return out


@pytest.mark.slow
def test_continuation_scores_equal_whole_sequence_passes(tiny_model_dir, tmp_path):
    backend = HFBackend(tiny_hf_config(tiny_model_dir, tmp_path, batch_size=8, max_new_tokens=2))
    variants = get_axis("option_order").variants(ITEM) + get_axis("label_set").variants(ITEM)
    requests = [v.render(ITEM, cloze=True) for v in variants]
    outputs = backend.complete(requests)
    for request, out in zip(requests, outputs):
        assert set(out.continuation_logprobs) == set(request.labels)
        expected = naive_scores(backend, request)
        for label, value in out.continuation_logprobs.items():
            assert value == pytest.approx(expected[label], abs=1e-4)
    # the same prompt asked with other option strings is its own request, not a copy
    swapped = replace(requests[0], continuations=tuple(reversed(requests[0].continuations)))
    again, other = backend.complete([requests[0], swapped])
    assert other.continuation_logprobs == pytest.approx(naive_scores(backend, swapped), abs=1e-4)
    assert other.continuation_logprobs != again.continuation_logprobs
    plain = backend.complete([variants[0].render(ITEM)])[0]
    assert plain.continuation_logprobs == {}  # not asked, not computed
    assert outputs[0].text == plain.text  # scoring does not change the generated answer


def test_cloze_readout_is_the_argmax_and_none_without_scores():
    out = Output("", continuation_logprobs={"A": -2.0, "B": -0.5, "C": -1.0})
    assert read_label("cloze", out, ("A", "B", "C"), "Answer:") == "B"
    assert read_label("cloze", Output(""), ("A", "B"), "Answer:") is None
    assert read_label("regex", Output(" a"), ("a", "b"), "Answer:") == "a"
    assert read_label("regex", Output(" A"), ("a", "b"), "Answer:") == "a"
    assert read_label("regex", Output(" III"), ("I", "II", "III", "IV"), "Answer:") == "III"
