"""What the fork server of :mod:`support.forked` imports once: the libraries every audit of a
local or served model imports, none of them a pytest plugin, and nothing that computes or starts
a thread. Measured here (AVX2, a fresh process each): transformers' Llama modelling (the tiny test
model's and SmolLM2's architecture, with torch) ~7 s, litellm ~4.6 s, matplotlib's Agg pyplot (the
Allure plots) ~1 s. Then the loaded objects are frozen: a child's garbage collections skip them
(a 2-item audit of the tiny model, fresh cache: 8.3 s -> 6.2 s with these imports, 4.3 s frozen)."""

import gc

import matplotlib

matplotlib.use("Agg")  # as flipgate.plotting selects it

# litellm reads LITELLM_LOCAL_MODEL_COST_MAP when imported: support.forked.IMPORT_TIME_ENV
import litellm  # noqa: E402, F401
import matplotlib.pyplot  # noqa: E402, F401
import numpy  # noqa: E402, F401
import pandas  # noqa: E402, F401
import scipy.stats  # noqa: E402, F401
import torch  # noqa: E402, F401
import transformers.models.llama.modeling_llama  # noqa: E402, F401
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402, F401

gc.freeze()
