"""The golden comparison (tests/support/golden_compare.py) lets ODI's Monte Carlo numbers move by
their sampling error on another CPU class, and nothing else: planted changes on a checked-in golden
card must fail it."""

from __future__ import annotations

import copy
import json
import re

import pytest
from support.golden_compare import card_mismatches, markdown_mismatches
from support.paths import REPO

GOLDEN = REPO / "tests" / "golden" / "cards" / "tiny-v2" / "arc_challenge.json"


@pytest.fixture
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_a_card_matches_itself(golden):
    assert card_mismatches(golden["card"], copy.deepcopy(golden["card"])) == []
    assert markdown_mismatches(golden["markdown"], list(golden["markdown"])) == []


def test_odi_draws_from_another_cpu_class_pass(golden):
    """The AVX2 class's draws as measured against these (AVX-512) goldens, 2026-11-28."""
    got = copy.deepcopy(golden["card"])
    odi = got["odi"]
    odi["facets"]["option_order"]["sigma_pi"]["ci"][0] = 0.91797935962677  # was 1.0067
    odi["facets"]["option_order"]["sigma_pi"]["median"] = 2.7888290882110596  # was 2.7675
    odi["diagnostics"]["correct"]["ess_bulk_min"] = 886.1141086583315  # was 821.57
    odi["diagnostics"]["modal"]["rhat_max"] = 1.001172638330857  # was 1.0017
    odi["diagnostics"]["modal"]["worst"]["rhat"] = "delta"  # was sigma_pi
    assert card_mismatches(got, golden["card"]) == []


def test_the_samplers_outcomes_are_not_settings(golden):
    """A fit draws on until its ESS and R̂ meet their targets: how many draws it took and where
    its ESS landed are outcomes of the CPU's draws (700 against 646 on the avx512_bf16 class)."""
    got = copy.deepcopy(golden["card"])
    odi = got["odi"]
    odi["draws_per_chain"] = {k: v + 54 for k, v in odi["draws_per_chain"].items()}
    target = odi["diagnostics"]["modal"]["thresholds"]["ess_min"]
    odi["diagnostics"]["modal"]["ess_bulk_min"] = target + 1.0  # still at or above its target
    odi["diagnostics"]["modal"]["rhat_max"] = 1.0099
    assert card_mismatches(got, golden["card"]) == []
    lines = list(golden["markdown"])
    moved = [
        re.sub(r"ESS bulk min \d+", "ESS bulk min 441", line).replace('"modal": ', '"modal": 1')
        for line in lines
    ]
    assert moved != lines
    assert markdown_mismatches(moved, lines) == []


def modal(card: dict) -> dict:
    return card["odi"]["diagnostics"]["modal"]


def sigma_pi(card: dict) -> dict:
    return card["odi"]["facets"]["option_order"]["sigma_pi"]


PLANTS = {
    "theta+0.1": lambda c: c["odi"]["theta"].update(median=0.1),
    "sigma_pi*1.2": lambda c: sigma_pi(c).update(median=sigma_pi(c)["median"] * 1.2),
    "ess-below-target": lambda c: modal(c).update(
        ess_bulk_min=modal(c)["thresholds"]["ess_min"] - 1
    ),
    "rhat-above-target": lambda c: modal(c).update(
        rhat_max=modal(c)["thresholds"]["rhat_max"] + 0.01
    ),
    "draws-not-a-count": lambda c: c["odi"].update(draws_per_chain={"modal": 0, "correct": 500}),
    "verdict": lambda c: c["odi"]["verdicts"][0].update(verdict="fail"),
    "passed": lambda c: modal(c).update(passed=False),
    "divergences": lambda c: modal(c).update(divergences=1),
    "section-gone": lambda c: c["odi"].pop("theta"),
    "row-gone": lambda c: c["odi"]["panel_checks"].pop(),
    "setting": lambda c: c["odi"].update(hdi_prob=0.9),
    "outside-odi": lambda c: c["scores"].clear(),
}


@pytest.mark.parametrize("plant", PLANTS.values(), ids=PLANTS.keys())
def test_a_planted_change_fails(golden, plant):
    got = copy.deepcopy(golden["card"])
    plant(got)
    assert card_mismatches(got, golden["card"])


def test_markdown_numbers_move_inside_odi_only(golden):
    lines = golden["markdown"]
    odi = next(i for i, line in enumerate(lines) if line.startswith("## ODI"))
    row = next(i for i in range(odi, len(lines)) if "ess_bulk_min" in lines[i])
    moved = list(lines)
    moved[row] = moved[row].replace(moved[row].split("|")[2], " 1163.091 ")
    assert markdown_mismatches(moved, lines) == []
    worded = list(lines)
    worded[row] = worded[row].replace("**pass**", "**fail**")
    assert markdown_mismatches(worded, lines)
    sigma = next(i for i in range(odi, len(lines)) if lines[i].startswith("| option_order |"))
    far = list(lines)
    far[sigma] = re.sub(r"\d+\.\d+", "9.999", far[sigma], count=1)
    assert markdown_mismatches(far, lines)
    outside = next(i for i in range(odi) if any(ch.isdigit() for ch in lines[i]))
    nudged = list(lines)
    nudged[outside] = re.sub(r"\d", lambda m: str((int(m[0]) + 1) % 10), lines[outside], count=1)
    assert markdown_mismatches(nudged, lines)
