"""Configuration-envelope metrics (docs/definitions.md §7; SafetyRepro §4–§5, App. D, F, G, I, L)
against hand-computed values."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from flipgate import FlipgateError
from flipgate.metrics import envelope as E

# ------------------------------------------------------------------------------------------ SDI


def test_sdi_hand_computed():
    # (0.6 − 0.2) / mean(0.2, 0.4, 0.6) = 0.4 / 0.4 = 1.0
    assert E.sdi([0.2, 0.4, 0.6]) == pytest.approx(1.0)
    # SafetyRepro App. E qwen/truthfulqa: (0.693 − 0.140)/0.540 ≈ 1.024 — with a 3-point slice
    # whose mean is 0.540: scores 0.140, 0.787, 0.693 → mean 1.620/3 = 0.540, range
    # 0.787 − 0.140 = 0.647
    assert E.sdi([0.140, 0.787, 0.693]) == pytest.approx(0.647 / 0.540)
    assert E.sdi([0.5]) == 0.0  # one config: no range


# ------------------------------------------------------------------------------------------ CFR


def test_cfr_n48_half_split_is_0_5106():
    # 2·48/47 · ½ · ½ = 96/188 = 0.510638...
    assert E.cfr([0.3] * 24 + [0.8] * 24, 0.5) == pytest.approx(0.5106, abs=5e-5)
    assert E.cfr([0.3] * 24 + [0.8] * 24, 0.5) == pytest.approx(96 / 188)
    # SafetyRepro App. L: at n = 12 the median-θ ceiling would be 2·12/11 · ¼ = 0.5455
    assert E.cfr([0.1] * 6 + [0.9] * 6, 0.5) == pytest.approx(24 / 44)


def test_cfr_hand_computed_and_pair_identity():
    # scores 0.4, 0.6, 0.7, 0.5 at θ = 0.5: passes (≥, inclusive) are 0.6, 0.7, 0.5 → p = 3/4
    # CFR = 2·4/3 · 3/4 · 1/4 = 8/3 · 3/16 = 0.5; pairs with differing verdicts:
    # 1 fail × 3 pass = 3 of 6
    assert E.cfr([0.4, 0.6, 0.7, 0.5], 0.5) == pytest.approx(0.5)
    s = np.random.default_rng(3).random(17)
    verdict = s >= 0.6
    brute = np.mean([verdict[i] != verdict[j] for i, j in itertools.combinations(range(17), 2)])
    assert E.cfr(s, 0.6) == pytest.approx(brute)
    assert E.cfr([0.9, 0.8, 0.7], 0.5) == 0.0  # unanimous pass


# ------------------------------------------------------------------------------------ rho_flip


def test_rho_flip_and_strict_disagreement_hand_computed():
    a = [0.5, 0.7, 0.9, 0.2, 0.4, 0.6]
    b = [0.4, 0.6, 0.8, 0.3, 0.4, 0.6]
    # signs of a−b: + + + − 0 0 → N+ = 3, N− = 1, N0 = 2, |C| = 6
    assert E.sign_counts(a, b) == (3, 1, 2)
    assert E.rho_flip(a, b) == pytest.approx(1 / 6)  # min(3, 1)/6
    assert E.rho_flip(b, a) == pytest.approx(1 / 6)  # symmetric
    assert E.strict_disagreement(a, b) == pytest.approx(2 * 3 * 1 / (6 * 5))  # = 0.2
    assert E.rho_flip([0.9, 0.8], [0.1, 0.2]) == 0.0  # one model dominates strictly (D1)


def test_rho_flip_lower_bound_needs_no_ties():
    # SafetyRepro §5.1 calls rho_flip a lower bound on 2N+N−/(|C|(|C|−1)). Without ties it holds …
    a, b = [1, 1, 1, 0, 0], [0, 0, 0, 1, 1]  # N+ = 3, N− = 2: rho = 2/5 = 0.4 ≤ 12/20 = 0.6
    assert E.rho_flip(a, b) <= E.strict_disagreement(a, b)
    # … but not with ties: N+ = N− = 1, N0 = 8 → rho = 1/10 > 2/90
    a, b = [1, 0] + [0.5] * 8, [0, 1] + [0.5] * 8
    assert E.rho_flip(a, b) == pytest.approx(0.1)
    assert E.strict_disagreement(a, b) == pytest.approx(2 / 90)


def test_rho_flip_ceiling():
    # ⌊|C|/2⌋/|C|: |C| = 4 → 2/4, 5 → 2/5, 48 → 24/48, 1 → 0
    assert E.rho_flip_ceiling(4) == 0.5
    assert E.rho_flip_ceiling(5) == pytest.approx(0.4)
    assert E.rho_flip_ceiling(48) == 0.5
    assert E.rho_flip_ceiling(1) == 0.0
    # the ceiling is reached by a 2:3 split at |C| = 5
    assert E.rho_flip([1, 1, 0, 0, 0], [0, 0, 1, 1, 1]) == E.rho_flip_ceiling(5)


# ------------------------------------------------------------------------- tau_R and orderings

TIES = pd.DataFrame(
    [
        [0.9, 0.5, 0.1],  # c1: a > b > c     pair signs (ab, ac, bc) = (+, +, +)
        [0.9, 0.5, 0.5],  # c2: a > b = c     (+, +, 0)
        [0.1, 0.5, 0.9],
    ],  # c3: c > b > a     (−, −, −)
    columns=["a", "b", "c"],
)


def test_tau_r_with_ties_hand_computed():
    # τ-b = Σ sign products / sqrt(untied pairs · untied pairs)
    # τ(c1,c2) = (1+1+0)/sqrt(3·2) = 2/√6; τ(c1,c3) = −3/3 = −1; τ(c2,c3) = (−1−1+0)/√6 = −2/√6
    # τ_R = (2/√6 − 1 − 2/√6)/3 = −1/3
    assert E.tau_r(TIES) == pytest.approx(-1 / 3)
    t = E.kendall_tau_matrix(TIES)
    assert t[0, 1] == pytest.approx(2 / math.sqrt(6))
    assert t[1, 2] == pytest.approx(-2 / math.sqrt(6))


def test_tau_matrix_is_scipy_tau_b():
    x = np.random.default_rng(0).integers(0, 3, size=(25, 4)).astype(float)  # many ties
    ours = E.kendall_tau_matrix(x)
    for i, j in itertools.combinations(range(25), 2):
        ref = kendalltau(x[i], x[j], variant="b").statistic
        assert (np.isnan(ref) and np.isnan(ours[i, j])) or ours[i, j] == pytest.approx(ref)


def test_tau_r_skips_fully_tied_configs():
    # c2 ties every model → no τ-b with anyone; only (c1, c3): identical orders → 1
    x = [[0.9, 0.5, 0.1], [0.5, 0.5, 0.5], [0.8, 0.4, 0.2]]
    assert E.tau_r(x) == pytest.approx(1.0)
    assert math.isnan(E.tau_r([[0.5, 0.5], [0.3, 0.3]]))


def test_total_orders_alphabetical_tie_break():
    # SafetyRepro App. V: qwen = yi = 0.6255 > mistral → listed as qwen ≥ yi > mistral
    x = pd.DataFrame([[0.6255, 0.6255, 0.50]], columns=["yi", "qwen", "mistral"])
    assert E.total_orders(x) == [("qwen", "yi", "mistral")]
    # TIES: c1 (a,b,c); c2 a > b = c → b before c → (a,b,c); c3 (c,b,a)
    assert E.total_orders(TIES) == [("a", "b", "c"), ("a", "b", "c"), ("c", "b", "a")]


def test_total_order_mismatch_and_orderings_reached_hand_computed():
    # pairs (c1,c2) same, (c1,c3) differ, (c2,c3) differ → 2/3; distinct orders 2 of 3! = 6 → 1/3
    assert E.total_order_mismatch(TIES) == pytest.approx(2 / 3)
    assert E.orderings_reached(TIES) == pytest.approx(2 / 6)
    # renaming c → "0" moves the tie-break: c2 = (a, "0", b) now, so all three orders differ
    renamed = TIES.rename(columns={"c": "0"})
    assert E.total_order_mismatch(renamed) == pytest.approx(1.0)
    assert E.orderings_reached(renamed) == pytest.approx(3 / 6)


def test_m3_uniform_null_mismatch_is_five_sixths():
    rng = np.random.default_rng(7)
    mism = [E.total_order_mismatch(rng.random((48, 3))) for _ in range(40)]
    taus = [E.tau_r(rng.random((48, 3))) for _ in range(40)]
    assert np.mean(mism) == pytest.approx(5 / 6, abs=0.01)  # P(two random 3-orders differ) = 5/6
    assert np.mean(taus) == pytest.approx(0.0, abs=0.02)  # E[τ_R] = 0 under the null
    assert E.orderings_reached(rng.random((300, 3))) == 1.0  # all 6 orders reached


def test_to_score_matrix_keeps_complete_configs():
    df = pd.DataFrame(
        {
            "model": ["a", "b", "a", "b", "a"],
            "config": [1, 1, 2, 2, 3],
            "score": [0.1, 0.2, 0.3, 0.4, 0.5],
        }
    )
    wide = E.to_score_matrix(df)
    assert list(wide.columns) == ["a", "b"] and list(wide.index) == [1, 2]
    assert len(E.to_score_matrix(df, complete=False)) == 3


# ------------------------------------------------------------------------------------- ANOVA


def test_anova_exact_small_design_hand_computed():
    # 2 models × 2 templates × 2 replicates (the replicate is the few-shot column, not a term)
    #   a/T1: 1, 3 (mean 2)   a/T2: 3, 5 (mean 4)   b/T1: 5, 7 (mean 6)   b/T2: 9, 11 (mean 10)
    # grand mean 44/8 = 5.5; model means a 3, b 8; template means T1 4, T2 7
    # SS_model = 4·((3−5.5)² + (8−5.5)²) = 50;  SS_template = 4·(1.5² + 1.5²) = 18
    # interaction effects ±0.5 in every cell → SS_inter = 8·0.25 = 2
    # residual: every obs is ±1 from its cell mean → SS_res = 8, df_res = 8 − 4 = 4, MS_W = 2
    # SS_total = 20.25+6.25+6.25+0.25+0.25+2.25+12.25+30.25 = 78 = 50+18+2+8
    df = pd.DataFrame(
        {
            "model": list("aaaabbbb"),
            "template": ["T1", "T1", "T2", "T2"] * 2,
            "few_shot": [0, 3] * 4,
            "score": [1, 3, 3, 5, 5, 7, 9, 11],
        }
    )
    res = E.anova_shares(df, terms=("model", "template", "model:template"))
    t = res.table
    assert t.loc["model", "sum_sq"] == pytest.approx(50)
    assert t.loc["template", "sum_sq"] == pytest.approx(18)
    assert t.loc["model:template", "sum_sq"] == pytest.approx(2)
    assert t.loc["Residual", "sum_sq"] == pytest.approx(8) and t.loc["Residual", "df"] == 4
    assert res.ss_total == pytest.approx(78) and res.ms_within == pytest.approx(2)
    assert res.eta_model == pytest.approx(50 / 78)
    assert res.eta_impl == pytest.approx(18 / 78)  # template is the only impl term present
    assert res.eta_interaction == pytest.approx(2 / 78)
    assert res.rho == pytest.approx(18 / 50)  # 0.36
    # Hays ω²: model (50 − 1·2)/(78 + 2) = 0.6; template (18 − 2)/80 = 0.2; inter (2 − 2)/80 = 0
    assert t.loc["model", "omega_sq"] == pytest.approx(0.6)
    assert t.loc["template", "omega_sq"] == pytest.approx(0.2)
    assert t.loc["model:template", "omega_sq"] == pytest.approx(0.0, abs=1e-12)
    # balanced: the shares (terms + residual) add to 1
    assert t["eta_sq"].sum() == pytest.approx(1.0)


def _planted(seed=0, model_eff=(0.0, 0.2, 0.4), template_eff=(0.0, 0.01, 0.02, 0.03), noise=0.01):
    rng = np.random.default_rng(seed)
    rows = [
        {
            "model": m,
            "template": t,
            "decoding": d,
            "few_shot": k,
            "score": 0.4 + me + te + rng.normal(0, noise),
        }
        for m, me in zip(["mistral", "qwen", "yi"], model_eff)
        for t, te in zip(["T1", "T2", "T3", "T4"], template_eff)
        for d in ["greedy", "T0.3", "T0.7"]
        for k in [0, 3, 5]
    ]
    return pd.DataFrame(rows)


def test_anova_planted_model_effect_dominates():
    df = _planted()
    res = E.anova_shares(df)  # SafetyRepro App. F terms
    assert list(res.table.index) == [*E.ANOVA_TERMS, "Residual"]
    assert "decoding:few_shot" not in res.table.index
    # balanced 3×4×3×3 = 108 rows: df = 2,3,2,2, 6,4,4, 6,6 (=35) → residual 108 − 1 − 35 = 72
    assert res.table.loc["Residual", "df"] == 72
    # main-effect SS equals the classical marginal-means SS on a balanced design (numpy)
    grand = df["score"].mean()
    ss_model = (df.groupby("model")["score"].mean().sub(grand) ** 2).sum() * 36
    assert res.table.loc["model", "sum_sq"] == pytest.approx(ss_model)
    assert res.eta_model > 0.8
    assert res.rho < 0.05
    assert res.table["omega_sq"].drop("Residual").le(res.table["eta_sq"].drop("Residual")).all()
    assert res.as_dict()["rho"] == pytest.approx(res.rho)


def test_anova_table_total_on_unbalanced_design():
    df = _planted(seed=1).drop(index=[0, 5, 17])  # unbalanced but full rank (no empty 2-way cell)
    by_data = E.anova_shares(df)
    by_table = E.anova_shares(df, total="table")
    assert by_table.table["eta_sq"].sum() == pytest.approx(1.0)
    assert by_data.ss_total == pytest.approx(((df.score - df.score.mean()) ** 2).sum())


def test_anova_aliased_design_names_the_term():
    df = _planted()
    df = df[~((df.model == "qwen") & (df.template == "T4"))]  # empty model×template cell
    with pytest.raises(FlipgateError, match=r"rank-deficient.*model:template"):
        E.anova_shares(df)
    # dropping the aliased interaction gives a fittable design
    terms = [t for t in E.ANOVA_TERMS if t != "model:template"]
    assert E.anova_shares(df, terms=terms).eta_model > 0.8


def test_anova_bad_inputs():
    df = _planted()
    with pytest.raises(FlipgateError, match=r"factor 'decoding' has a single level \['greedy'\]"):
        E.anova_shares(df[df.decoding == "greedy"])
    with pytest.raises(FlipgateError, match=r"lacks column\(s\) \['few_shot'\]"):
        E.anova_shares(df.drop(columns="few_shot"))
    with pytest.raises(FlipgateError, match=r"'model:template' needs its main effect"):
        E.anova_shares(df, terms=("model", "model:template"))
    with pytest.raises(FlipgateError, match="saturated"):
        cells = df.groupby(["model", "template"], as_index=False)["score"].mean()
        E.anova_shares(cells, terms=("model", "template", "model:template"))
    with pytest.raises(FlipgateError, match=r"response column 'score' has 1 missing"):
        E.anova_shares(df.assign(score=df.score.where(df.index != 3)))


# ---------------------------------------------------------------------------------- bootstrap


def test_config_bootstrap_coverage_on_planted_mean():
    # true mean 0.6; percentile interval of the mean over 40 configs should cover ≈ 95%
    rng = np.random.default_rng(11)
    hits = 0
    for r in range(150):
        scores = rng.normal(0.6, 0.1, size=40)
        est, lo, hi = E.config_bootstrap(scores, np.mean, n=300, seed=r)
        assert lo <= est <= hi
        hits += lo <= 0.6 <= hi
    assert 0.85 <= hits / 150 <= 0.99


def test_config_bootstrap_sdi_is_deterministic_and_brackets():
    s = np.linspace(0.2, 0.8, 24)
    a = E.config_bootstrap(s, E.sdi, n=200, seed=42)
    assert a == E.config_bootstrap(s, E.sdi, n=200, seed=42)
    assert a[0] == pytest.approx(E.sdi(s)) and a[1] <= a[2]


def test_config_bootstrap_long_frame_draws_whole_configs():
    df = pd.DataFrame(
        {
            "model": ["a", "b", "c"] * 5,
            "config": np.repeat(list("vwxyz"), 3),
            "score": np.random.default_rng(2).random(15),
        }
    )
    seen = []

    def stat(frame):
        wide = E.to_score_matrix(frame)
        seen.append(wide.shape)
        return E.tau_r(wide)

    est, lo, hi = E.config_bootstrap(df, stat, n=20, seed=1, config_col="config")
    assert est == pytest.approx(E.tau_r(E.to_score_matrix(df)))
    assert all(shape == (5, 3) for shape in seen)  # every draw: 5 distinct configs × 3 models
    assert -1 <= lo <= hi <= 1


def test_config_bootstrap_undefined_draws_are_dropped():
    def stat(x):
        if len(set(x.tolist())) < 2:
            raise FlipgateError("degenerate")
        return float(np.mean(x))

    draws = E.config_bootstrap_draws([0.0, 1.0], stat, n=50, seed=0)
    assert np.isnan(draws).any() and not np.isnan(draws).all()
    est, lo, hi = E.config_bootstrap([0.0, 1.0], stat, n=50, seed=0)
    assert est == 0.5 and lo == hi == 0.5  # only the mixed draws (mean ½) remain


def test_max_stat_interval_single_slice_equals_config_bootstrap():
    s = np.random.default_rng(4).random(30)
    ms = E.max_stat_bootstrap({"only": s}, E.sdi, n=200, seed=9)
    assert (ms.estimate, ms.lo, ms.hi) == pytest.approx(E.config_bootstrap(s, E.sdi, n=200, seed=9))
    assert ms.slice == "only"


def test_max_stat_interval_dominates_each_slice():
    # three aligned slices sharing the configuration draws: the max of the resampled stats is
    # ≥ each slice's resampled stat draw by draw, so its percentiles are too
    rng = np.random.default_rng(5)
    slices = {m: 0.5 + 0.1 * rng.random(24) for m in ["mistral", "qwen", "yi"]}  # SDI ≈ 0.2
    ms = E.max_stat_bootstrap(slices, E.sdi, n=300, seed=3, groups={m: "bench" for m in slices})
    point = {m: E.sdi(s) for m, s in slices.items()}
    assert ms.estimate == max(point.values()) and ms.slice == max(point, key=point.get)
    for s in slices.values():
        _, lo, hi = E.config_bootstrap(s, E.sdi, n=300, seed=3)
        assert ms.lo >= lo - 1e-12 and ms.hi >= hi - 1e-12
    # a planted dominant slice drives the max interval
    big = {**slices, "big": np.r_[np.full(12, 0.1), np.full(12, 0.9)]}
    ms2 = E.max_stat_bootstrap(big, E.sdi, n=300, seed=3)
    assert ms2.slice == "big" and ms2.lo > max(point.values())


# -------------------------------------------------------------------------------- parse-clean


def _long():
    # 3 models × 4 configs; cell (yi, c4) fails the parse threshold
    scores = {
        "mistral": [0.5, 0.6, 0.7, 0.8],
        "qwen": [0.6, 0.5, 0.8, 0.7],
        "yi": [0.4, 0.9, 0.6, 0.1],
    }
    rows = [
        {"benchmark": "bbq", "model": m, "config": f"c{i + 1}", "score": s, "parse_rate": 1.0}
        for m, v in scores.items()
        for i, s in enumerate(v)
    ]
    df = pd.DataFrame(rows)
    df.loc[(df.model == "yi") & (df.config == "c4"), "parse_rate"] = 0.90
    return df


def test_parse_clean_recomputes_on_kept_cells():
    df = _long()
    res = E.parse_clean(df)
    assert len(res.frame) == 11 and len(res.dropped) == 1 and len(res.complete) == 9
    yi = res.slices.set_index("model").loc["yi"]
    # yi keeps 0.4, 0.9, 0.6 → SDI = 0.5/(1.9/3) = 1.5/1.9; CFR_0.5: p = 2/3 → 2·3/2 · 2/9 = 2/3
    assert yi["n"] == 3 and yi["sdi"] == pytest.approx(1.5 / 1.9)
    assert yi["cfr_0.5"] == pytest.approx(2 / 3)
    # full data: yi 0.4, 0.9, 0.6, 0.1 → SDI = 0.8/0.5 = 1.6
    full = E.slice_metrics(df).set_index("model").loc["yi"]
    assert full["sdi"] == pytest.approx(1.6)
    # orderings over the 3 complete configs (c1–c3):
    #   c1 qwen .6 > mistral .5 > yi .4; c2 yi .9 > mistral .6 > qwen .5;
    #   c3 qwen .8 > mistral .7 > yi .6
    #   distinct orders 2 → 2/6; mismatch: (c1,c3) same, others differ → 2/3
    #   mistral vs qwen: − + − → N+ = 1, N− = 2 → rho = 1/3 (ceiling ⌊3/2⌋/3 = 1/3)
    o = res.orderings.iloc[0]
    assert o["n_configs"] == 3 and o["n_orderings"] == 2
    assert o["orderings_reached"] == pytest.approx(1 / 3)
    assert o["total_order_mismatch"] == pytest.approx(2 / 3)
    assert o["rho_flip_max"] == pytest.approx(1 / 3) and o["rho_flip_ceiling"] == pytest.approx(
        1 / 3
    )
    flips = E.pair_flips(res.complete).set_index(["model_a", "model_b"])
    assert tuple(flips.loc[("mistral", "qwen"), ["n_plus", "n_minus", "n_zero"]]) == (1, 2, 0)


def test_parse_clean_bad_inputs():
    df = _long()
    with pytest.raises(FlipgateError, match=r"min_parse_rate must lie in \[0, 1\], got 95"):
        E.parse_clean(df, min_parse_rate=95)
    with pytest.raises(FlipgateError, match="several rows for cell"):
        E.parse_clean(pd.concat([df, df.iloc[:1]]))
    with pytest.raises(FlipgateError, match=r"lacks column\(s\) \['parse_rate'\]"):
        E.parse_clean(df.drop(columns="parse_rate"))


# ----------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call, pattern",
    [
        (lambda: E.sdi([0.0, 0.0]), r"sdi: scores has mean 0"),
        (lambda: E.sdi([]), r"sdi: scores has 0 configuration\(s\), need at least 1"),
        (lambda: E.sdi([0.1, float("nan")]), r"sdi: scores contains non-finite"),
        (lambda: E.cfr([0.4], 0.5), r"cfr: scores has 1 configuration\(s\), need at least 2"),
        (lambda: E.cfr([0.4, 0.6], None), r"cfr: theta must be a finite number, got None"),
        (lambda: E.rho_flip([0.1, 0.2], [0.1]), r"a and b differ in length \(2 vs 1"),
        (lambda: E.strict_disagreement([0.1], [0.2]), r"1 configuration\(s\), need at least 2"),
        (lambda: E.rho_flip_ceiling(0), r"n_configs must be an integer ≥ 1, got 0"),
        (
            lambda: E.tau_r([[0.1, 0.2, 0.3]]),
            r"tau_r: score_matrix has 1 configuration\(s\), need at least 2",
        ),
        (lambda: E.tau_r([0.1, 0.2]), r"must be 2-D"),
        (lambda: E.tau_r([[0.1], [0.2]]), r"1 model\(s\), need at least 2"),
        (lambda: E.total_order_mismatch([[0.1, np.nan], [0.2, 0.3]]), r"rows \[0\] have missing"),
        (
            lambda: E.orderings_reached([[0.1, 0.2]], models=["a"]),
            r"models has 1 names for 2 columns",
        ),
        (lambda: E.config_bootstrap([0.5], np.mean), r"has 1 configuration\(s\), need at least 2"),
        (
            lambda: E.config_bootstrap([0.5, 0.6], np.mean, n=0),
            r"n \(resamples\) must be an integer ≥ 1, got 0",
        ),
        (
            lambda: E.max_stat_bootstrap(
                {"a": [0.1, 0.2], "b": [0.1, 0.2, 0.3]}, np.mean, groups={"a": 1, "b": 1}
            ),
            r"slice 'b' has 3 configurations but its group 1 has 2",
        ),
    ],
)
def test_bad_inputs_raise_flipgate_error(call, pattern):
    with pytest.raises(FlipgateError, match=pattern):
        call()


def test_config_bootstrap_of_anova_rho_on_long_frame():
    # SafetyRepro App. G / I bootstrap ρ by resampling configurations (all models' cells of a
    # config together)
    df = _planted(seed=2)
    df["config"] = df.template + "|" + df.decoding + "|" + df.few_shot.astype(str)
    est, lo, hi = E.config_bootstrap(
        df, lambda f: E.anova_shares(f).rho, n=8, seed=0, config_col="config"
    )
    assert est == pytest.approx(E.anova_shares(df).rho)
    assert 0 <= lo <= hi < 0.05
