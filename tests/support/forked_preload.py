"""What the fork server of :mod:`support.forked` imports once: the libraries every audit of a
local model imports, none of them a pytest plugin, and nothing that computes."""

import numpy  # noqa: F401
import pandas  # noqa: F401
import scipy.stats  # noqa: F401
import torch  # noqa: F401
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401
