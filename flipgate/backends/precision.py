"""The floating-point precision a local model computes in (docs/engine.md, "Precision").

``dtype: auto``, the default of an ``hf`` entry, picks bfloat16 only where the hardware computes
it natively and float32 elsewhere: on a CPU without bf16 instructions torch and oneDNN emulate
bf16 through float32 conversions, and it is slower than float32 itself (measured: 2.5x on an
AVX2-only CPU class, docs/engine.md). An NF4 model's compute dtype follows the same rule. A
declared dtype always wins. Every choice carries its reason, which the GRID card's axis receipt
records (``dtype_choice``).

Native bf16 on a CPU means both:

- the instructions: x86 ``avx512_bf16`` or AMX (``amx_bf16``), or Arm's BF16 extension, as the
  CPU reports them (torch's cpuinfo on x86, ``/proc/cpuinfo`` on Arm Linux);
- the kernels that use them: torch's CPU kernels at the AVX512 level (``ATEN_CPU_CAPABILITY``
  can lower it) and oneDNN not capped below AVX512_CORE_BF16 (``ONEDNN_MAX_CPU_ISA``). Those two
  variables are also how an AVX2-only machine is emulated on a bf16 one (docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path

#: the names a models.yaml ``dtype`` may take, and the dtype each stands for
DTYPES = {
    "auto": "auto",
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}
#: oneDNN ISA caps (``ONEDNN_MAX_CPU_ISA``) that keep its native bf16 kernels
ONEDNN_BF16_ISAS = frozenset(
    {
        "ALL",
        "AVX512_CORE_BF16",
        "AVX512_CORE_FP16",
        "AVX512_CORE_AMX",
        "AVX512_CORE_AMX_FP16",
        "AVX10_1_512",
        "AVX10_1_512_AMX",
        "AVX10_1_512_AMX_FP16",
        "AVX10_2_512",
        "AVX10_2_512_AMX_2",
    }
)


@dataclass(frozen=True)
class Precision:
    """A model's compute dtype and why it was chosen."""

    dtype: str  # "float32" or "bfloat16"
    why: str  # e.g. "auto: CPU without native bf16 (torch CPU kernels AVX2) -> float32"


@dataclass(frozen=True)
class Bf16Support:
    """Whether a device computes bf16 natively, and the evidence."""

    native: bool
    evidence: str


def _x86_bf16_instructions() -> list[str]:
    """The x86 CPU's native bf16 instruction sets, as torch's cpuinfo reports them."""
    import torch

    found = []
    if getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)():
        found.append("avx512_bf16")
    if getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)():
        found.append("amx_bf16")
    return found


def _arm_bf16_instructions(cpuinfo: Path = Path("/proc/cpuinfo")) -> list[str]:
    """Arm's BF16 extension, from the kernel's CPU features (Linux; elsewhere none is claimed)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for line in text.splitlines():
        if line.lower().startswith("features") and "bf16" in line.split(":", 1)[-1].split():
            return ["bf16"]
    return []


def cpu_bf16() -> Bf16Support:
    """Whether this CPU, with the kernels this process may use, computes bf16 natively."""
    import torch

    arm = platform.machine().lower() in ("aarch64", "arm64")
    instructions = _arm_bf16_instructions() if arm else _x86_bf16_instructions()
    if not instructions:
        wanted = "Arm bf16" if arm else "avx512_bf16 or amx_bf16"
        return Bf16Support(False, f"CPU without native bf16 (no {wanted})")
    have = ", ".join(instructions)
    if not arm:
        kernels = torch.backends.cpu.get_cpu_capability()
        if kernels != "AVX512":
            return Bf16Support(False, f"CPU without native bf16 (torch CPU kernels {kernels})")
        isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
        if isa and isa not in ONEDNN_BF16_ISAS:
            return Bf16Support(
                False, f"CPU without native bf16 (ONEDNN_MAX_CPU_ISA={isa}, though {have})"
            )
    return Bf16Support(True, f"CPU with native bf16 ({have})")


def cuda_bf16() -> Bf16Support:
    import torch

    name = torch.cuda.get_device_name()
    if torch.cuda.is_bf16_supported(including_emulation=False):
        return Bf16Support(True, f"GPU with native bf16 ({name})")
    return Bf16Support(False, f"GPU without native bf16 ({name})")


@functools.cache
def bf16_support(device: str = "cpu") -> Bf16Support:
    """Native bf16 on ``device`` ("cpu" or "cuda"), checked once per process."""
    return cuda_bf16() if device.startswith("cuda") else cpu_bf16()


def resolve_dtype(declared: str | None, device: str = "cpu") -> Precision:
    """The dtype a local model computes in: a declared one as it is (canonical name), ``auto``
    (also what no declaration means) bf16 where ``device`` computes it natively, else float32."""
    name = DTYPES[declared or "auto"]
    if name != "auto":
        return Precision(name, f"declared: {declared}")
    support = bf16_support(device)
    dtype = "bfloat16" if support.native else "float32"
    return Precision(dtype, f"auto: {support.evidence} -> {dtype}")
