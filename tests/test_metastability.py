"""Issue 28, metastability: restarts from each template and cold, the verdict, and the branches through beta,
checked against independent routes (the document's own solver run long, the beta sweep's bifurcation)."""
import copy

import numpy as np
import pytest

from bftcore import api
from bftcore.models.presets import PRESETS
from bftcore.studies import metastability as m


def _own_solver(name, init, iterations=3000):
    """The preset's own learning algorithm (the paper's massive relaxation) run long from ``init``."""
    cfg = copy.deepcopy(PRESETS[name][0])
    cfg["solver"].update(init=init, max_iter=iterations, min_iter=1)
    return api.run(cfg).last


def test_fig28_ends_on_the_wrong_template_and_the_verdict_names_the_lower_solution():
    cfg = PRESETS["fig28"][0]
    current = api.run(cfg).last  # the preset's run: it stays near t_2
    assert current.mixing[1] > 0.99
    found = m.restarts(cfg)
    assert [r["label"] for r in found] == ["template 1", "template 2", "cold"]
    v = m.verdict(float(current.energy), current.mixing, found)
    assert v is not None and v["label"] in ("template 1", "cold") and v["mixing"][0] > 0.99
    # an independent route: the paper's own relaxation from t_1, run long, reaches the same energy
    lower = _own_solver("fig28", "template:0")
    assert v["energy"] == pytest.approx(float(lower.energy), rel=1e-7)
    assert v["delta"] == pytest.approx(float(current.energy) - float(lower.energy), rel=1e-6)
    assert v["message"] == f"metastable: a solution with energy lower by {v['delta']:.3g} exists (from {v['label']})"


@pytest.mark.parametrize("name", ["fig26", "metastable_mixture", "fig23", "two_trends"])
def test_no_verdict_on_the_lowest_solution(name):
    cfg = PRESETS[name][0]
    c = copy.deepcopy(cfg)
    c["solver"].update(max_iter=500)
    current = api.run(c).last
    assert m.verdict(float(current.energy), current.mixing, m.restarts(cfg)) is None


def test_the_same_solution_a_rounding_lower_is_not_an_alarm():
    found = [{"start": "uniform", "label": "cold", "energy": 10.0 - 1e-3, "mixing": [0.5, 0.5]}]
    assert m.verdict(10.0, [0.5, 0.5], found) is None  # same mixing: the same solution
    assert m.verdict(10.0, [0.9, 0.1], found) is not None
    assert m.verdict(10.0, [0.9, 0.1], [{**found[0], "energy": 10.0 - 1e-6}]) is None  # within the rounding
    assert m.verdict(float("nan"), [0.9, 0.1], found) is None


def test_starts_are_each_template_and_cold():
    assert m.starts(PRESETS["fig28"][0]) == [("template:0", "template 1"), ("template:1", "template 2"),
                                              ("uniform", "cold")]
    assert m.starts(PRESETS["two_trends"][0])[-1] == ("average", "cold")
    assert not m.applies(PRESETS["fig21"][0]) and m.applies(PRESETS["fig28"][0])


def test_branch_betas_are_log_spaced_with_beta_in_the_middle():
    b = m.branch_betas(0.3)
    assert b.size == m.BRANCH_POINTS and b[b.size // 2] == 0.3
    assert np.allclose(np.diff(np.log10(b)), 2 * m.BRANCH_DECADES / (b.size - 1))


def test_the_t2_branch_ends_at_the_sweeps_bifurcation():
    cfg = PRESETS["fig28"][0]
    seen = []
    doc = m.branches(cfg, on_point=lambda i, p: seen.append((i, p["beta"])))
    assert len(seen) == 3 * m.BRANCH_POINTS  # every point reported as it is computed
    t2 = doc["branches"][1]
    a1 = np.array([mm[0] for mm in t2["mixing"]])
    betas = np.array(t2["beta"])
    assert list(betas) == sorted(betas)
    on_t2 = betas[a1 < 0.5]
    ends = (betas[a1 >= 0.5].max(), on_t2.min())  # the branch ends between these two betas
    # a second algorithm: the beta sweep (continuation with bisection of the jump) puts the fold in that interval
    sweep = api.sweep_document(cfg, ends[0] * 0.9, ends[1] * 1.1, 8, spacing="log")
    folds = [float(b) for b in sweep["bifurcations"]]
    assert any(ends[0] <= f <= ends[1] for f in folds), (ends, folds)
    # the middle point of each branch is the restart from its start
    mid = {r["label"]: r["energy"] for r in m.restarts(cfg)}
    for br in doc["branches"]:
        k = br["beta"].index(float(cfg["beta"]))
        assert br["energy"][k] == pytest.approx(mid[br["label"]], rel=1e-9)


def test_cancel_stops_the_branches():
    with pytest.raises(InterruptedError):
        m.branches(PRESETS["fig28"][0], cancel=lambda: True)
    with pytest.raises(InterruptedError):
        m.restarts(PRESETS["fig28"][0], cancel=lambda: True)


def test_the_session_jumps_to_the_lower_solution():
    from app.session import BFTSession
    s = BFTSession()
    s.load_preset("fig28")
    s.solve()
    s.check_metastability()
    v = s.metastable["verdict"]
    assert v is not None and s.branches["complete"] and len(s.branches["branches"]) == 3
    assert s.jump_to_lower()
    assert s.record.energy == pytest.approx(v["energy"], rel=1e-7) and s.record.mixing[0] > 0.99
    s.check_metastability()
    assert s.metastable["verdict"] is None
    s.beta = 0.5  # the diagram is kept for another beta in its range ...
    assert s.branches is not None and s.metastable is None
    s.lam = 1.0  # ... and dropped for another problem
    assert s.branches is None
