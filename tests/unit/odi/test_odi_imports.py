"""Importing flipgate costs no JAX: the suite registry loads the ODI package in every process, and
JAX, NumPyro and the fits load with the first name that needs them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import flipgate.odi
from flipgate.odi.devices import FLAG

#: two XLA flags of this jaxlib that the device flag must keep
A, B = "--xla_cpu_enable_fast_math=false", "--xla_backend_optimization_level=1"


@pytest.mark.slow
def test_the_registry_loads_every_suite_without_jax():
    code = (
        "import sys\n"
        "from flipgate import registry\n"
        "assert 'odi' in {s.name for s in registry.suites()}\n"
        "print(sorted(m for m in ('jax', 'numpyro', 'flipgate.odi.fit') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_every_public_name_resolves_to_its_submodules_object():
    from flipgate.odi import fit, simulate

    assert flipgate.odi.odi is fit.odi and flipgate.odi.PROFILES is fit.PROFILES
    assert flipgate.odi.simulate_scale is simulate.simulate_scale
    for name in flipgate.odi.__all__:
        assert getattr(flipgate.odi, name) is not None
    # the submodules keep their names: a function of the same name lives in them
    assert callable(fit.fit) and callable(simulate.simulate)


def test_an_unknown_name_is_an_attribute_error():
    try:
        flipgate.odi.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_the_device_flag_keeps_the_other_xla_flags_and_waits_for_no_backend():
    code = (
        "import os\n"
        f"os.environ['XLA_FLAGS'] = '{A} {FLAG}=7 {B}'\n"
        "from flipgate.odi.devices import expose_host_cores\n"
        "print(os.environ['XLA_FLAGS'])\n"  # the package set it to this machine's cores
        "assert expose_host_cores(3)\n"
        "print(os.environ['XLA_FLAGS'])\n"
        "import jax\n"
        "print(jax.local_device_count())\n"
        "assert not expose_host_cores(1)\n"  # the backend has started: too late, unchanged
        "print(os.environ['XLA_FLAGS'])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cores = os.cpu_count()
    assert proc.stdout.splitlines() == [
        f"{FLAG}={cores} {A} {B}",
        f"{FLAG}=3 {A} {B}",
        "3",
        f"{FLAG}=3 {A} {B}",
    ]
