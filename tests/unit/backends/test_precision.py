"""``dtype: auto``: bfloat16 only where the hardware computes it natively, else float32; the
check itself is patched here (what the CPU reports, the kernels torch and oneDNN may use), not
the machine."""

from __future__ import annotations

import pytest
import torch
from support.tiny_models import tiny_hf_config

from flipgate.backends import precision
from flipgate.backends.hf import HFBackend
from flipgate.backends.precision import resolve_dtype


@pytest.fixture
def cpu(monkeypatch, tmp_path):
    """Set what the CPU reports: ``cpu(avx512_bf16=..., amx=..., kernels=..., onednn=...,
    arm_features=...)``; the per-process answer is recomputed after each setting."""

    def set_cpu(
        avx512_bf16=False, amx=False, kernels="AVX512", onednn=None, arm_features=None
    ) -> None:
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: kernels)
        if onednn is None:
            monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
        else:
            monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", onednn)
        machine = "x86_64" if arm_features is None else "aarch64"
        monkeypatch.setattr(precision.platform, "machine", lambda: machine)
        if arm_features is not None:
            info = tmp_path / "cpuinfo"
            info.write_text(f"processor\t: 0\nFeatures\t: {arm_features}\n")
            monkeypatch.setattr(precision, "_arm_bf16_instructions", lambda: precision_arm(info))
        precision.bf16_support.cache_clear()

    precision_arm = precision._arm_bf16_instructions
    yield set_cpu
    precision.bf16_support.cache_clear()


@pytest.mark.parametrize(
    "reported, dtype, why",
    [
        ({}, "float32", "auto: CPU without native bf16 (no avx512_bf16 or amx_bf16) -> float32"),
        (
            {"avx512_bf16": True},
            "bfloat16",
            "auto: CPU with native bf16 (avx512_bf16) -> bfloat16",
        ),
        ({"amx": True}, "bfloat16", "auto: CPU with native bf16 (amx_bf16) -> bfloat16"),
        (  # the AVX2-only class emulated on a bf16 CPU: torch's kernels at AVX2
            {"avx512_bf16": True, "kernels": "AVX2"},
            "float32",
            "auto: CPU without native bf16 (torch CPU kernels AVX2) -> float32",
        ),
        (  # oneDNN capped below its bf16 kernels
            {"avx512_bf16": True, "onednn": "avx2"},
            "float32",
            "auto: CPU without native bf16 (ONEDNN_MAX_CPU_ISA=AVX2, though avx512_bf16) "
            "-> float32",
        ),
        (
            {"avx512_bf16": True, "onednn": "AVX512_CORE_AMX"},
            "bfloat16",
            "auto: CPU with native bf16 (avx512_bf16) -> bfloat16",
        ),
        (
            {"arm_features": "fp asimd sve bf16 i8mm"},
            "bfloat16",
            "auto: CPU with native bf16 (bf16) -> bfloat16",
        ),
        (
            {"arm_features": "fp asimd evtstrm crc32"},
            "float32",
            "auto: CPU without native bf16 (no Arm bf16) -> float32",
        ),
    ],
)
def test_auto_picks_bf16_only_where_the_cpu_computes_it_natively(cpu, reported, dtype, why):
    cpu(**reported)
    assert resolve_dtype("auto") == precision.Precision(dtype, why)
    assert resolve_dtype(None) == resolve_dtype("auto")  # what no declaration means


@pytest.mark.parametrize(
    "declared, dtype",
    [("bfloat16", "bfloat16"), ("bf16", "bfloat16"), ("fp32", "float32"), ("float32", "float32")],
)
def test_a_declared_dtype_wins_on_any_cpu(cpu, declared, dtype):
    for native in (False, True):
        cpu(avx512_bf16=native)
        assert resolve_dtype(declared) == precision.Precision(dtype, f"declared: {declared}")


def test_on_a_gpu_auto_asks_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: False)
    precision.bf16_support.cache_clear()
    try:
        assert resolve_dtype("auto", "cuda") == precision.Precision(
            "float32", "auto: GPU without native bf16 (Tesla T4) -> float32"
        )
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation: True)
        precision.bf16_support.cache_clear()
        assert resolve_dtype("auto", "cuda").dtype == "bfloat16"
    finally:
        precision.bf16_support.cache_clear()


@pytest.mark.parametrize("native, dtype", [(False, torch.float32), (True, torch.bfloat16)])
def test_an_hf_model_without_a_dtype_computes_in_the_auto_choice(
    cpu, tiny_model_dir, tmp_path, native, dtype
):
    """The model's weights, the cache key's settings and the card's receipt (the fingerprint)
    all carry the dtype chosen, and the fingerprint says why; a warm rerun (stored fingerprint,
    no load) says the same."""
    cpu(avx512_bf16=native)
    cfg = tiny_hf_config(tiny_model_dir, tmp_path, max_new_tokens=2)
    del cfg["dtype"]
    backend = HFBackend(cfg)
    assert next(backend.model.parameters()).dtype == dtype
    name = str(dtype).removeprefix("torch.")
    assert backend.settings["dtype"] == backend.fingerprint["dtype"] == name
    assert backend.fingerprint["dtype_choice"] == resolve_dtype("auto").why
    said = "auto: CPU with native" if native else "auto: CPU without native"
    assert backend.fingerprint["dtype_choice"].startswith(said)
    again = HFBackend({**cfg, "dtype": "auto"})
    assert not again._loaded and again.fingerprint == backend.fingerprint
    declared = HFBackend({**cfg, "dtype": name})  # same dtype, same stored fingerprint
    assert not declared._loaded and declared.fingerprint["dtype_choice"] == f"declared: {name}"
    assert declared.settings == backend.settings  # same numerics, same cache key


@pytest.mark.slow
@pytest.mark.parametrize("native, dtype", [(False, torch.float32), (True, torch.bfloat16)])
def test_nf4_computes_in_the_auto_choice(cpu, tiny_model_dir, tmp_path, native, dtype):
    cpu(avx512_bf16=native)
    backend = HFBackend(tiny_hf_config(tiny_model_dir, tmp_path, quantization="nf4", dtype="auto"))
    import bitsandbytes as bnb  # after the backend's quiet import of it

    q_proj = backend.model.model.layers[0].self_attn.q_proj
    assert isinstance(q_proj, bnb.nn.Linear4bit) and q_proj.compute_dtype == dtype
    assert backend.settings["dtype"] == str(dtype).removeprefix("torch.")
