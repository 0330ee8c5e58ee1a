"""The conditional density with a prior potential on L = ln P (issue 29: Sect. 6.5 on the 2-D grid) as a document
and a problem kind: the gate's density paragraph of bftcore.foundations.config._robust, bftcore.models.robust's
RobustDensityKind (registered in bftcore.models.problems).  Independent routes: the quadratic potential against the
Gaussian density of bftcore.models.density (Newton, another solver), the energy written out here with numpy
differences and the Fig. 12 formula, finite differences of that energy for the gradient, a change of units for the
units of b, and the roughness of the fits for what the inverted cup does."""
import json
import math

import numpy as np
import pytest

from bftcore import api
from bftcore.__main__ import main
from bftcore.foundations.config import ConfigError, validate_config
from bftcore.models import problems, robust

XS = np.linspace(0.0, 3.5, 8)
YS = np.linspace(-2.0, 2.0, 12)


def ddoc(potential=None, lam: float = 1.0, a: float = 1.0, c: float = 1.0, shift_x: float = 0.0,
         shift_y: float = 0.0, **extra) -> dict:
    """A small 2-D density: 8 x 12 Neumann nodes, 50 data on the nodes around sin(x), lambda_x = 1, lambda_y = 0.5
    (an anisotropic prior: the unit of omega is the stiffer axis's).  ``a``, ``c``, ``shift_x``, ``shift_y``: the
    same problem in other units, x -> a x + shift_x, y -> c y + shift_y, with the prior rescaled so that the Gaussian
    fit follows (lambda cell lambda_axis / h_axis^2 unchanged: lambda_x * (a/c)^2, lambda * c/a)."""
    rng = np.random.default_rng(5)
    ix = rng.integers(0, 8, 50)
    iy = np.clip(np.round((np.sin(XS[ix]) + 2.0) / 4.0 * 11 + rng.normal(0, 1.2, 50)).astype(int), 0, 11)
    out = {"model": "density",
           "grid": {"x": {"min": a * 0.0 + shift_x, "max": a * 3.5 + shift_x, "n": 8, "boundary": "neumann"},
                    "y": {"min": -2.0 * c + shift_y, "max": 2.0 * c + shift_y, "n": 12, "boundary": "neumann"}},
           "data": np.column_stack([a * XS[ix] + shift_x, c * YS[iy] + shift_y]).tolist(),
           "prior": {"lambda": lam * c / a, "l2": 1.0, "lambda_x": (a / c) ** 2, "lambda_y": 0.5},
           "solver": {"tol": 1e-12}}
    if potential is not None:
        out["prior"]["potential"] = potential
    for key, value in extra.items():
        out[key] = {**out[key], **value} if isinstance(value, dict) and key in out else value
    return out


def roughness(L) -> float:
    """Sum of the squared differences of L between neighbouring nodes, along x and along y."""
    L = np.asarray(L, dtype=float)
    return float(np.sum(np.diff(L, axis=0) ** 2) + np.sum(np.diff(L, axis=1) ** 2))


def energy_by_hand(cfg, L) -> float:
    """-sum_data L + lambda hx hy sum_e psi(omega_e) with the Neumann l2 differences written out (no operator of
    bftcore) and psi of Fig. 12 from its formula a (1 - 1/(1 + (|s - s0|/b)^gamma)), in the units of the gate's
    docstring (S the larger of sqrt(lambda_x)/hx and sqrt(lambda_y)/hy; a in units of S^2 b^2 / 2)."""
    pr, g = cfg["prior"], cfg["grid"]
    hx = (g["x"]["max"] - g["x"]["min"]) / (g["x"]["n"] - 1)
    hy = (g["y"]["max"] - g["y"]["min"]) / (g["y"]["n"] - 1)
    S = max(math.sqrt(pr["lambda_x"]) / hx, math.sqrt(pr["lambda_y"]) / hy)
    p = pr["potential"]
    omega = np.concatenate([(math.sqrt(pr["lambda_x"]) * np.diff(L, axis=0) / hx).ravel(),
                            (math.sqrt(pr["lambda_y"]) * np.diff(L, axis=1) / hy).ravel()])
    if p["name"] == "quadratic":
        psi = 0.5 * (omega - p["s0"] * S) ** 2
    else:
        b = p["b"] * S
        A = p["a"] * b ** 2 / 2
        r = np.abs(omega - p["s0"] * S) / b
        psi = A * (1.0 - 1.0 / (1.0 + r ** p["gamma"]))
    N = np.zeros(L.shape)
    for x, y in cfg["data"]:
        N[int(round((x - g["x"]["min"]) / hx)), int(round((y - g["y"]["min"]) / hy))] += 1
    return float(-np.sum(N * L) + pr["lambda"] * hx * hy * np.sum(psi))


# ------------------------------------------------------------------------------------------------------ the gate
def test_the_gate_completes_a_density_with_a_potential_and_finds_its_kind():
    cfg = validate_config(ddoc({"name": "cup", "b": 0.5}))
    assert cfg["prior"]["potential"] == {"name": "cup", "a": 1.0, "b": 0.5, "gamma": 2.0, "s0": 0.0}
    assert cfg["solver"]["method"] == "irls" and cfg["solver"]["max_iter"] == 500 and "data_term" not in cfg
    assert cfg.kind is problems.ROBUST_DENSITY and validate_config(json.loads(json.dumps(cfg))) == cfg
    alone = validate_config(ddoc(solver={"method": "irls"}))  # IRLS alone: the quadratic potential
    assert alone.kind is problems.ROBUST_DENSITY and alone["prior"]["potential"] == {"name": "quadratic", "s0": 0.0}
    assert validate_config(ddoc()).kind is problems.DENSITY  # a plain density stays plain
    reg = {"model": "regression", "data": [[2.0, 1.0]], "templates": [{"kind": "constant", "value": 0.0}],
           "prior": {"potential": {"name": "cup"}}}
    assert validate_config(reg).kind is problems.ROBUST_REGRESSION  # the kinds tell the models apart


@pytest.mark.parametrize("extra, message", [
    ({"data_term": {"name": "insensitive"}}, r"data_term: a density's data term is its counts .*remove data_term"),
    ({"prior": {"field": "P"}}, r"acts on the log-density L = ln P .*set prior.field to \"L\""),
    ({"grid": {"x": {"min": 0.0, "max": 0.0, "n": 1, "boundary": "neumann"}}},
     r"solved on a 2-D grid \(grid.x.n > 1"),
    ({"solver": {"method": "newton"}}, r"solver.method 'newton': a density with a prior potential is solved by IRLS"),
    ({"templates": [{"kind": "gaussian", "mu": 0.0, "sigma": 1.0}, {"kind": "gaussian", "mu": 1.0, "sigma": 1.0}]},
     r"takes at most one template .*got 2"),
    ({"choose": {"lambda": "evidence"}}, r"choose: the evidence is not defined for a non-Gaussian prior potential"),
    ({"prior": {"potential": {"name": "cup", "b": 0}}}, r"prior.potential.b must be > 0"),
    ({"prior": {"potential": {"name": "inverted_cup", "a": 1}}}, r"a of the inverted_cup potential must be < 0"),
])
def test_the_gate_refuses_what_a_density_with_a_potential_does_not_take_saying_why(extra, message):
    bad = ddoc({"name": "cup"})
    for key, value in extra.items():
        if key == "prior":
            bad["prior"] = {**bad["prior"], **value}
        elif key == "grid":
            bad["grid"] = {**bad["grid"], **value}
            bad["data"] = [[0.0, y] for _, y in bad["data"]]
        else:
            bad[key] = value
    with pytest.raises(ConfigError, match=message):
        validate_config(bad)


def test_the_gate_refuses_a_robust_data_term_on_a_density_without_a_potential():
    with pytest.raises(ConfigError, match="a density's data term is its counts"):
        validate_config({"model": "density", "data_term": {"name": "mixture2"}})


# ------------------------------------------------------------------------------------------------ the energy
@pytest.mark.parametrize("potential", [{"name": "quadratic", "s0": 0.3}, {"name": "cup", "b": 0.7},
                                       {"name": "cusp", "b": 1.5, "s0": 0.2}, {"name": "inverted_cup", "b": 0.9}])
def test_the_energy_and_its_gradient_are_the_formulas_and_their_finite_differences(potential):
    cfg = validate_config(ddoc(potential, templates=[]))
    pb = robust.density_problem_from_config(cfg)
    E, hy = pb.energy, pb.grid.hy
    rng = np.random.default_rng(11)
    L = robust.normalise_log(rng.normal(0.0, 1.0, pb.grid.shape), hy)
    point = E.at(L)
    assert point.value == pytest.approx(energy_by_hand(cfg, L), rel=1e-12)
    # the step is applied as L -> normalise(L + eps v): the g-gradient is its derivative (central differences)
    for _ in range(3):
        v = rng.normal(0.0, 1.0, L.shape)
        eps = 1e-6
        fd = (energy_by_hand(cfg, robust.normalise_log(L + eps * v, hy))
              - energy_by_hand(cfg, robust.normalise_log(L - eps * v, hy))) / (2 * eps)
        assert float(np.vdot(point.gradient, v)) == pytest.approx(fd, rel=1e-6, abs=1e-8 * np.abs(point.gradient).sum())


# ------------------------------------------------------------------------------------------------- the solver
@pytest.mark.parametrize("start", ["gaussian", "uniform"])
def test_the_quadratic_potential_is_the_gaussian_density_fit(start):
    plain = ddoc()
    ref = api.run(plain)
    cfg = validate_config(ddoc({"name": "quadratic"}))
    init = None if start == "gaussian" else np.zeros((8, 12))  # from uniform, IRLS does the work itself
    fit = cfg.kind.solve(cfg, init)
    assert fit.last.converged and ref.last.converged and fit.verdict.startswith("converged")
    assert start == "gaussian" or fit.last.iteration > 3
    np.testing.assert_allclose(fit.L, ref.L, rtol=0, atol=1e-8)
    assert fit.last.energy == pytest.approx(ref.last.energy, rel=1e-12)
    assert fit.last.test_error is None and fit.last.train_error == pytest.approx(ref.last.train_error, rel=1e-9)


@pytest.mark.parametrize("potential", [{"name": "cup", "b": 0.5}, {"name": "cusp", "b": 2.0},
                                       {"name": "inverted_cup", "b": 2.0}])
def test_the_energy_never_rises_over_the_irls_steps(potential):
    cfg = validate_config(ddoc(potential, solver={"max_iter": 80}))
    records = list(cfg.kind.iterate(cfg))
    E = np.array([r.energy for r in records])
    assert len(records) > 3 and records[0].method == "start"
    assert np.all(np.diff(E) <= 1e-12 * np.abs(E[:-1]).max())
    assert E[-1] == pytest.approx(energy_by_hand(cfg, records[-1].L), rel=1e-10)
    assert {r.method for r in records[1:]} <= {"irls", "gradient"}
    assert records[-1].verdict and all(r.verdict is None for r in records[:-1])


def test_iterate_streams_one_record_per_step_and_they_are_the_solves(monkeypatch):
    """Counted, not timed: when the first record arrives no IRLS direction has been solved yet; the whole run solves
    many.  The streamed records are those of solve."""
    cfg = validate_config(ddoc({"name": "cup", "b": 0.5}, truth="paper"))
    solved = []
    direction = robust.IRLSDensityStep.direction
    monkeypatch.setattr(robust.IRLSDensityStep, "direction",
                        lambda self, point: solved.append(1) or direction(self, point))
    stream = cfg.kind.iterate(cfg)
    first = next(stream)
    at_first = len(solved)
    streamed = [first] + list(stream)
    assert at_first == 0 and len(solved) >= len(streamed) - 1 > 5
    fit = cfg.kind.solve(cfg)
    assert [r.iteration for r in streamed] == [r.iteration for r in fit.history] == list(range(len(streamed)))
    for a, b in zip(streamed, fit.history):
        assert (a.energy, a.train_error, a.test_error, a.method) == (b.energy, b.train_error, b.test_error, b.method)
        np.testing.assert_array_equal(a.L, b.L)
    assert first.test_error is not None and np.isfinite(first.test_error)


def test_the_same_numbers_in_any_units_give_the_same_fit_with_ln_p_shifted():
    """x -> a x + b, y -> c y + d with the prior rescaled as the Gaussian fit needs (ddoc): the same b, a, gamma and
    s0 give the same fit, ln p shifted by -ln c, and the same energy up to the data's -N ln c."""
    pot = {"name": "cup", "b": 0.5, "s0": 0.1}
    tight = {"tol": 1e-16}  # stationarity residual <= 1e-8: the stop is then no longer where the energy's rounding is
    ref = api.fit(ddoc(pot, solver=tight))
    gauss = api.fit(ddoc())
    assert ref["converged"] and np.max(np.abs(np.array(ref["L"]) - np.array(gauss["L"]))) > 0.1  # the cup acts
    n = len(ddoc()["data"])
    for a, c, sx, sy in [(1e-3, 1e3, 5.0, -40.0), (1e3, 1e-3, -3.0, 0.7), (1e3, 1e3, 0.0, 0.0), (1e-3, 1.0, 2.0, 0.0)]:
        moved = api.fit(ddoc(pot, a=a, c=c, shift_x=sx, shift_y=sy, solver=tight))
        assert moved["converged"]
        np.testing.assert_allclose(np.array(moved["L"]), np.array(ref["L"]) - math.log(c), rtol=0, atol=1e-8)
        assert moved["energy"] == pytest.approx(ref["energy"] + n * math.log(c), rel=1e-8, abs=1e-8)
        assert moved["potential"]["absolute"]["unit"] == pytest.approx(ref["potential"]["absolute"]["unit"] / c,
                                                                       rel=1e-12)


# -------------------------------------------------------------------------------------- what the inverted cup does
def test_the_inverted_cup_makes_patterns_not_smoothing_and_the_result_says_so():
    """The claim of INVERTED_CUP_PATTERNS, computed: with the same lambda and b the inverted cup's fit is far rougher
    (sum of squared differences of L) than the Gaussian fit and the cup's, which smooth."""
    gauss = api.fit(ddoc())
    cup = api.fit(ddoc({"name": "cup", "b": 2.0}))
    inv = api.fit(ddoc({"name": "inverted_cup", "b": 2.0}, solver={"max_iter": 60}))
    r_gauss, r_cup, r_inv = roughness(gauss["L"]), roughness(cup["L"]), roughness(inv["L"])
    assert r_inv > 100 * max(r_gauss, r_cup)  # measured: 36, 64 and 1e5 or more
    assert robust.INVERTED_CUP_PATTERNS in inv["notes"] and inv["verdict"] in inv["notes"]
    assert robust.INVERTED_CUP_PATTERNS not in cup["notes"] and cup["notes"] == [cup["verdict"]]
    assert "patterns" in robust.INVERTED_CUP_PATTERNS and "smooth" in robust.INVERTED_CUP_PATTERNS


# ------------------------------------------------------------------------------------------ the result and the CLI
def test_the_result_document_has_the_density_keys_and_the_robust_ones():
    cfg = validate_config(ddoc({"name": "cup", "b": 0.5}, truth="paper"))
    doc = api.fit(cfg)
    plain = api.fit(ddoc(truth="paper"))
    assert set(plain) <= set(doc)
    assert doc["kind"] == "robust_density" and doc["model"] == "density" and doc["field"] == "L"
    assert doc["potential"]["name"] == "cup" and doc["potential"]["b"] == 0.5
    unit = max(1.0 / 0.5, math.sqrt(0.5) / (4.0 / 11))  # S of the gate's docstring: the stiffer axis's
    assert doc["potential"]["absolute"]["unit"] == pytest.approx(unit, rel=1e-12)
    assert doc["potential"]["absolute"]["b"] == pytest.approx(0.5 * unit, rel=1e-12)
    assert doc["verdict"].startswith("converged") and doc["notes"] == [doc["verdict"]]
    assert doc["steps"] and set(doc["steps"]) <= {"irls", "gradient"} and len(doc["steps"]) == doc["iterations"]
    assert doc["test_error"] is not None and doc["normalisation_error"] < 1e-12


def test_evidence_and_posterior_draws_are_refused_with_words():
    cfg = validate_config(ddoc({"name": "cup"}))
    kind = cfg.kind
    with pytest.raises(ConfigError, match="evidence of a density with a prior potential is not defined"):
        kind.evidence_path(cfg, "lambda", None)
    with pytest.raises(ConfigError, match="posterior draws of a density with a prior potential are not implemented"):
        api.posterior_summary(cfg)
    assert kind.exact(cfg) is None and kind.path_parameters == () and kind.nodes(cfg) == 96


def test_the_cli_fits_a_density_with_a_potential(tmp_path, capsys):
    path = tmp_path / "robust_density.json"
    path.write_text(json.dumps(ddoc({"name": "inverted_cup", "b": 2.0}, solver={"max_iter": 40})))
    assert main(["fit", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ref = api.fit(validate_config(json.loads(path.read_text())))
    assert out["kind"] == "robust_density" and out["potential"]["name"] == "inverted_cup"
    assert out["iterations"] == ref["iterations"] == len(out["history"]) - 1 == 40
    np.testing.assert_allclose(out["L"], ref["L"], rtol=0, atol=1e-12)
    assert robust.INVERTED_CUP_PATTERNS in out["notes"]
    assert main(["fit", str(path)]) == 0
    text = capsys.readouterr().out
    assert "patterns" in text and "not converged after 40" in text


@pytest.mark.parametrize("args, message", [
    (["evidence"], "evidence is not defined for a density with a prior"),
    (["bootstrap"], "bootstrap is not defined for a density with a prior"),
    (["sweep", "--beta", "0.1:1:3"], "sweep is not defined for a density with a prior"),
])
def test_the_cli_refuses_the_gaussian_studies_by_name(tmp_path, capsys, args, message):
    path = tmp_path / "robust_density.json"
    path.write_text(json.dumps(ddoc({"name": "cup"})))
    assert main([args[0], str(path), *args[1:]]) != 0
    assert message in capsys.readouterr().err


def test_the_api_refuses_a_bootstrap_before_fitting():
    with pytest.raises(ValueError, match="not defined for a robust density document"):
        api.bootstrap_document(ddoc({"name": "cup"}), 3)
