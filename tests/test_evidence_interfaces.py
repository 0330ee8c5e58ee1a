"""The evidence through every door (issue 14): ``python -m bftcore evidence``, a document that asks ``fit`` to choose
its hyperparameters, ``BFTDensity(lam="evidence")`` and one-dimensional densities, and the dashboard's session."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from app.session import BFTSession
from bftcore import api
from bftcore.estimator import BFTDensity
from bftcore.models import regression

ONE_D = {"grid": {"y": {"min": -4, "max": 4, "n": 60, "boundary": "neumann"}},
         "prior": {"field": "L", "l2": 1.0}}
REGRESSION = {"model": "regression", "grid": {"x": {"min": 0, "max": 10, "n": 101, "boundary": "neumann"}},
              "data": [[1.0, 1.2], [3.0, 2.0], [5.0, 2.5], [7.0, 2.4], [9.0, 0.9], [9.0, 1.1]],
              "prior": {"lambda": 1.0, "l0": 0.01, "l2": 1.0}, "templates": [{"kind": "constant", "value": 0}],
              "beta": 3.0}


def bimodal_sample(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < 0.5, rng.normal(-1.5, 0.5, n), rng.normal(1.0, 0.8, n)).clip(-4, 4)


def cli(*args, doc=None, tmp_path=None):
    argv = list(args)
    if doc is not None:
        path = tmp_path / "doc.json"
        path.write_text(json.dumps(doc))
        argv.insert(1, str(path))
    return subprocess.run([sys.executable, "-m", "bftcore", *argv], capture_output=True, text=True, timeout=300)


def test_the_evidence_command_prints_the_path_and_its_maximum(tmp_path):
    doc = dict(ONE_D, data=bimodal_sample(80).tolist())
    out = cli("evidence", "--lambda", "0.01:100:7", "--json", doc=doc, tmp_path=tmp_path)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert np.allclose(res["lambda"], np.geomspace(0.01, 100, 7))
    logev = np.array([np.nan if v is None else v for v in res["log_evidence"]])
    assert res["best"]["log_evidence"] >= np.nanmax(logev) - 1e-12      # refined between grid values
    assert 0.01 <= res["best"]["lambda"] <= 100 and res["method"] == "laplace"
    text = cli("evidence", doc=doc, tmp_path=tmp_path)
    assert text.returncode == 0 and "best: lambda = " in text.stdout
    order = json.loads(cli("evidence", "--l2", "0.1:10:4", "--json", doc=doc, tmp_path=tmp_path).stdout)
    assert np.allclose(order["l2"], np.geomspace(0.1, 10, 4)) and order["parameter"] == "l2"


def test_the_evidence_command_of_a_regression_refines_the_exact_maximum(tmp_path):
    out = cli("evidence", "--lambda", "0.01:100:9", "--json", doc=REGRESSION, tmp_path=tmp_path)
    res = json.loads(out.stdout)
    best = res["best"]["lambda"]
    assert res["best"]["log_evidence"] >= max(res["log_evidence"])
    cfg = api.validate_config(dict(REGRESSION, prior=dict(REGRESSION["prior"], **{"lambda": best})))
    assert abs(regression.evidence(cfg)["gradient"]["lambda"]) < 1e-5   # an interior maximum: zero slope
    beta = json.loads(cli("evidence", "--beta", "0.1:100:5", "--json", doc=REGRESSION, tmp_path=tmp_path).stdout)
    assert len(beta["beta"]) == 5 and "best" in beta


@pytest.mark.parametrize("args, message", [
    (("--lambda", "10:1:5"), "0 < MIN < MAX"),
    (("--lambda", "0.1:10:1"), "at least 2"),
    (("--lambda", "0.1:10:5", "--l0", "0.1:1:3"), "give one of"),
    (("--beta", "0.1:10:5"), "follows one of lambda, l0, l2, l4, l6"),
    (("--lambda", "0.1:10:100000"), "exceed the limit"),
])
def test_the_evidence_command_refuses_bad_ranges_in_one_line(tmp_path, args, message):
    out = cli("evidence", *args, doc=dict(ONE_D, data=[0.0, 1.0]), tmp_path=tmp_path)
    assert out.returncode == 2 and message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.parametrize("doc", [dict(ONE_D, data=[]), dict(REGRESSION, data=[])], ids=["density", "regression"])
def test_the_evidence_of_no_data_is_refused_instead_of_an_arbitrary_maximum(tmp_path, doc):
    # ln p(no data) = 0 for every lambda: the path used to be flat at 0 and its "best" the range's first value
    out = cli("evidence", doc=doc, tmp_path=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == ("error: with no data the evidence p(D | lambda) is 1 for every lambda, so there "
                                  "is nothing to choose; add data points")
    with pytest.raises(ValueError, match="no data"):
        api.choose_hyperparameters(dict(doc, choose={"lambda": {"min": 0.01, "max": 100, "n": 5}}))
    if doc.get("model") == "regression":
        ev = regression.RegressionEvidence.from_config(doc)
        for call in (lambda: ev.optimise(("lambda", "beta")), lambda: ev.path("beta", [1.0, 2.0], 1.0),
                     lambda: ev.surface(("lambda", [1.0, 2.0]), ("beta", [1.0, 2.0]), 1.0)):
            with pytest.raises(ValueError, match="no data"):
                call()
        # the value itself stays defined: ln p(no data) = 0, the posterior weights are the prior's
        assert ev.log_evidence(1.0) == pytest.approx(0.0, abs=1e-9)


def test_the_evidence_card_with_every_point_cleared_says_to_add_data():
    s = BFTSession(live=False)
    s.data = []
    s.compute_evidence()
    assert s.evidence == {"error": "Cannot compute the evidence: with no data the evidence p(D | lambda) is 1 for "
                                   "every lambda, so there is nothing to choose; add data points"}


def test_a_document_can_ask_fit_to_choose_lambda_and_the_result_says_what_was_chosen():
    doc = dict(ONE_D, data=bimodal_sample(100).tolist(), choose={"lambda": {"min": 0.01, "max": 100, "n": 9}})
    res = api.fit(doc)
    chosen = res["evidence"]["chosen"]["lambda"]
    path = api.evidence_document(doc, "lambda", np.geomspace(0.01, 100, 9))
    assert chosen == pytest.approx(path["best"]["lambda"], rel=1e-9)
    assert res["evidence"]["log_evidence"] == pytest.approx(path["best"]["log_evidence"], rel=1e-9)
    direct = api.fit(dict(ONE_D, data=doc["data"], prior=dict(ONE_D["prior"], **{"lambda": chosen})))
    assert np.allclose(res["P"], direct["P"], atol=1e-8)
    json.dumps(res, allow_nan=False)


def test_a_regression_document_chooses_lambda_and_beta_jointly():
    res = api.fit(dict(REGRESSION, choose={"lambda": "evidence", "beta": "evidence"}))
    ch = res["evidence"]["chosen"]
    cfg = api.validate_config(dict(REGRESSION, beta=ch["beta"], prior=dict(REGRESSION["prior"],
                                                                            **{"lambda": ch["lambda"]})))
    g = regression.evidence(cfg)
    assert g["log_evidence"] == pytest.approx(res["evidence"]["log_evidence"], abs=1e-9)
    assert abs(g["gradient"]["lambda"]) < 1e-4 and abs(g["gradient"]["beta"]) < 1e-4


def test_bftdensity_fits_a_one_dimensional_sample_and_chooses_lambda_by_evidence():
    y = bimodal_sample(150, seed=3)
    est = BFTDensity(l2=0.0, l6=1.0, lam="evidence", lam_range=(1e-3, 1e3, 13)).fit(y)
    assert est.density_.shape == (1, 200)
    hy = (est.grid_.y.max - est.grid_.y.min) / 199
    assert abs(est.density_.sum() * hy - 1) < 1e-10
    path = est.evidence_path_
    assert est.log_evidence_ >= np.nanmax(np.array(path["log_evidence"], dtype=float)) - 1e-12
    # the chosen lambda beats both ends of its range on the evidence, and the fit at it is the fit the result says
    assert est.log_evidence_ > path["log_evidence"][0] and est.log_evidence_ > path["log_evidence"][-1]
    fixed = BFTDensity(l2=0.0, l6=1.0, lam=est.lam_).fit(y)
    assert np.allclose(fixed.density_, est.density_, atol=1e-8)
    with pytest.raises(Exception, match="lam must be a number > 0 or \"evidence\""):
        BFTDensity(lam="cv").fit(y)


def test_the_posterior_summary_band_contains_the_map_and_narrows_with_data():
    widths = []
    for n in (20, 400):
        doc = dict(ONE_D, data=bimodal_sample(n).tolist())
        post = api.posterior_summary(doc, n=60)
        lo, hi = np.array(post["h_lo"]), np.array(post["h_hi"])
        h_map = np.asarray(api.fit(doc)["P"])[0] @ np.linspace(-4, 4, 60) * (8 / 59)
        assert np.all(lo <= h_map + 1e-9) and np.all(h_map <= hi + 1e-9)
        widths.append(float(np.mean(hi - lo)))
    assert widths[1] < widths[0]
    draws = api.posterior_summary(REGRESSION, n=7)
    assert np.asarray(draws["draws"]).shape == (7, 101) and draws["kind"] == "exact"


def test_the_session_computes_the_evidence_and_chooses_lambda():
    s = BFTSession()
    s.data = [[3.0, 3.0], [7.0, 12.0], [5.0, 8.0], [5.0, 9.0], [6.0, 8.0]]
    s.compute_evidence()                     # not served: at once
    ev = s.evidence
    assert "best" in ev and ev["method"] == "laplace", ev
    lo, hi = np.array(s.posterior["h_lo"]), np.array(s.posterior["h_hi"])
    assert lo.shape == (10,) and np.all(lo < hi)
    s.choose_lambda_by_evidence()
    assert s.lam == pytest.approx(ev["best"]["lambda"])
    s.templates = ["paper_t1", "paper_t2"]   # a prior mixture: said, not computed
    s.compute_evidence()
    assert "error" in s.evidence and "mixture" in s.evidence["error"]
    s.evidence = {"error": "x"}
    s.choose_lambda_by_evidence()
    assert s.message == "x" and not math.isnan(s.lam)


def test_the_regression_session_gets_exact_draws():
    s = BFTSession()
    s.model = "regression"
    s.data = [[2.0, 5.0], [4.0, 6.0], [8.0, 7.5]]
    s.compute_evidence()
    assert s.evidence["method"] == "exact" and np.asarray(s.posterior["draws"]).shape[1] == s.nx


def test_the_evidence_card_says_when_the_maximum_is_the_end_of_the_range():
    """Two points on the paper mesh: the Laplace evidence still rises at the path's largest λ, so the card says the
    maximum is only a bound; with enough data the maximum is interior and nothing is added."""
    from app.views.evidence import EvidenceView
    s = BFTSession()
    s.data = [[3.0, 3.0], [7.0, 12.0]]
    s.compute_evidence()
    card = EvidenceView(session=s)
    card._show()
    best = s.evidence["best"]
    assert best["at_edge"] and best["lambda"] == pytest.approx(max(s.evidence["lambda"]))
    assert "end of the range computed" in card.info.object and "towards larger λ" in card.info.object
    rng = np.random.default_rng(0)
    s.data = [[float(x), float(np.clip(np.round(x + 2 + rng.normal(0, 1.5)), 1, 15))]
              for x in rng.integers(1, 11, 60)]
    s.compute_evidence()
    card._show()
    assert not s.evidence["best"]["at_edge"]
    assert card.info.object.startswith("Maximum at λ") and "end of the range" not in card.info.object


@pytest.mark.parametrize("doc", [dict(ONE_D, data=bimodal_sample(40).tolist()), "fig21"])
def test_the_density_posterior_summary_draws_h_of_five_of_its_own_samples(doc):
    """The density's posterior draws (``h_draws``, drawn over the heatmap by the posterior toggle) are h(x) of the
    first five Laplace samples: the same samples again from the sampler with the same seed, and h by its own
    formula (709), ∑_j y_j P(x, y_j) h_y."""
    from bftcore.foundations import metrics
    from bftcore.foundations.config import kind_of
    from bftcore.models import presets
    from bftcore.models.density import build_density
    from bftcore.models.evidence import laplace_samples
    cfg = api.validate_config(presets.figure_config(doc) if isinstance(doc, str) else doc)
    field = kind_of(cfg).solve(cfg).field
    post = api.posterior_summary(cfg, field=field, n=30, seed=5)
    problem = build_density(cfg)
    samples = laplace_samples(problem, np.asarray(field, float).reshape(problem.grid.shape), 30,
                              np.random.default_rng(5))
    want = [metrics.regression_function(np.exp(S), problem.grid)[0] for S in samples[:5]]
    assert np.asarray(post["h_draws"]).shape == (5, problem.grid.x.n)
    assert np.allclose(post["h_draws"], want, rtol=0, atol=1e-12)
    # most of each draw lies in the 90 % band of the 30 samples it was taken from
    lo, hi, draws = np.array(post["h_lo"]), np.array(post["h_hi"]), np.array(post["h_draws"])
    assert np.mean((draws >= lo - 1e-12) & (draws <= hi + 1e-12)) > 0.6
