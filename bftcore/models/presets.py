"""The paper's true density, templates, data sets and figure configurations (Sect. 7.4, CONVENTIONS.md §2).

Everything is evaluated raw at the grid nodes, not renormalised: that is the convention under which the paper's
quoted test errors come out (2.23, 2.56, 2.90, 2.68).
"""
from __future__ import annotations

import copy
import csv
from importlib import resources

import numpy as np

from ..foundations.grid import Grid
from ..foundations.mixing import fig7_config
from ..foundations.tables import parse_labelled_table
from ..foundations.templates import MU_2, MU_A, MU_B, SIGMA_0, SIGMA_T, paper_t1, paper_t2, paper_true_density  # noqa: F401 - the paper's numbers, here too
from .regression import regression_presets
from .robust import step_outlier_data

TWO_POINTS = [[3.0, 3.0], [7.0, 12.0]]   # data of Figs 13-17
DATA50_SEED = 20031
DATA50_FILE = "paper50.csv"


def sample_paper_data(n: int = 50, seed: int = DATA50_SEED) -> np.ndarray:
    """Draw n points from (708) on the paper mesh: x uniform on 1..10, y by the discrete transformation (inverse
    CDF) method on the 15 grid values with P_true(x, .) normalised over them."""
    grid = Grid.paper()
    P = paper_true_density(grid)
    P = P / P.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    ix = rng.integers(0, grid.x.n, size=n)
    u = rng.random(n)
    iy = np.array([min(np.searchsorted(np.cumsum(P[i]), ui), grid.y.n - 1) for i, ui in zip(ix, u)])
    return np.column_stack([grid.x.nodes[ix], grid.y.nodes[iy]])


def paper_data_50() -> np.ndarray:
    """The 50-point training set of Figs 20-28, shipped as ``bftcore/data/paper50.csv`` (the paper's own points
    are unpublished; this sample is drawn by :func:`sample_paper_data` with seed ``DATA50_SEED``)."""
    with resources.files("bftcore.data").joinpath(DATA50_FILE).open() as fh:
        rows = [r for r in csv.reader(fh) if r and not r[0].startswith("#")]
    return np.array([[float(a), float(b)] for a, b in rows[1:]])


#: The classical real data sets shipped with bftcore (``bftcore/data``, provenance in each file's header):
#: name -> file.
REAL_DATA = {"old_faithful": "faithful.csv", "motorcycle": "mcycle.csv"}


def real_data(name: str) -> tuple[np.ndarray, dict]:
    """A shipped real data set as an (n, 2) array of (x, y) and its axes' labels (the CSV's header, with units):
    ``old_faithful`` (R's ``datasets::faithful``: 272 eruptions, x the eruption's duration, y the waiting time to
    the next, in minutes) or ``motorcycle`` (R's ``MASS::mcycle``: 133 head accelerations in g against the time
    after impact in ms).  Each file's comment lines give its source."""
    if name not in REAL_DATA:
        raise ValueError(f"unknown data set {name!r}; choose one of {', '.join(REAL_DATA)}")
    raw = resources.files("bftcore.data").joinpath(REAL_DATA[name]).read_bytes()
    return parse_labelled_table(raw, f"bftcore/data/{REAL_DATA[name]}")


def real_data_config(name: str) -> dict:
    """The conditional density p(y | x) of a shipped data set in its own units: a grid fitted to the data (30 x
    40 nodes, free in y), the data's labels on the axes, a (-Delta)^3 prior on L = ln P (Fig 16's: it favours L
    quadratic in y, Gaussian-like densities, and the free y boundary leaves those unpenalised), lambda_x /
    lambda_y isotropic in the axes' spans (the gate's rule), and lambda chosen by the evidence when fitted
    (``choose``; the dashboard chooses it on loading).  Newton from the kernel start.  The order is chosen by
    5-fold cross-validation (``scripts/real_data_cv.py``, docs/units.md): l6 beats l2 and l4 on Old Faithful."""
    data, labels = real_data(name)
    return {"model": "density", "grid": {"fit": True}, "data": data.tolist(), "labels": labels,
            "prior": {"field": "L", "lambda": 1.0, "l0": 0.0, "l2": 0.0, "l4": 0.0, "l6": 1.0},
            "templates": [], "weights": [], "beta": 1.0, "choose": {"lambda": "evidence"},
            # the masses are the gate's, in the grid's internal coordinates (the data's units are their own)
            "solver": {"method": "newton", "init": "kernel", "min_iter": 1, "max_iter": 100, "tol": 1e-8}}


def _grid_doc(bx: str) -> dict:
    return {"x": {"min": 1, "max": 10, "n": 10, "boundary": bx}, "y": {"min": 1, "max": 15, "n": 15,
                                                                        "boundary": "periodic"}}


def _fig_14_17(field: str, l2: float, l6: float) -> dict:
    newton = field == "L"
    return {
        "model": "density", "grid": _grid_doc("periodic"), "data": copy.deepcopy(TWO_POINTS),
        "prior": {"field": field, "lambda": 1.0, "lambda_x": 1.0, "lambda_y": 1.0,
                  "l0": 0.0, "l2": l2, "l4": 0.0, "l6": l6},
        "templates": [], "weights": [], "beta": 1.0,
        "solver": {"method": "newton" if newton else "massive", "mass2": 1.0, "init": "kernel",
                   "init_mass2": 0.1 if newton else 1.0, "min_iter": 4, "max_iter": 100, "tol": 1e-8},
        "truth": "paper",
    }


def _fig_21_28(lam: float, templates: bool, init: str, mass2: float = 0.01) -> dict:
    return {
        "model": "density", "grid": _grid_doc("neumann"), "data": paper_data_50().tolist(),
        "prior": {"field": "L", "lambda": lam, "lambda_x": 2.0, "lambda_y": 1.0,
                  "l0": 0.0, "l2": 1.0, "l4": 0.0, "l6": 0.0},
        "templates": [{"kind": "paper_t1"}, {"kind": "paper_t2"}] if templates else [],
        "weights": [0.5, 0.5] if templates else [], "beta": 1.0,
        "solver": {"method": "massive", "mass2": mass2, "init": init, "init_mass2": 0.01,
                   "min_iter": 4, "max_iter": 50, "tol": 1e-8},
        "truth": "paper",
    }


FIGURES = {
    "fig14": lambda: _fig_14_17("L", 0.025, 0.0),
    "fig15": lambda: _fig_14_17("P", 1.0, 0.0),
    "fig16": lambda: _fig_14_17("L", 0.0, 0.01),
    "fig17": lambda: _fig_14_17("P", 0.0, 0.1),
    "fig21": lambda: _fig_21_28(0.5, False, "uniform"),
    "fig22": lambda: _fig_21_28(0.5, False, "kernel"),
    "fig23": lambda: _fig_21_28(0.5, True, "template:0"),
    "fig24": lambda: _fig_21_28(0.5, True, "template:1"),
    "fig25": lambda: _fig_21_28(0.5, True, "uniform"),
    "fig26": lambda: _fig_21_28(1.0, True, "template:0"),
    "fig27": lambda: _fig_21_28(0.1, True, "template:0"),
    "fig28": lambda: _fig_21_28(1.2, True, "template:1", mass2=0.5),
}

FIGURE_NOTES = {
    "fig14": "Two data points and a Gaussian prior on L = ln P with a smoothness (-Delta) term, l2 = 0.025. Newton "
             "starts from a kernel-smoothed estimate and the energy drops within two iterations: the problem is "
             "nearly linear. The density peaks near 0.6 at the data point (7, 12), and the regression curve is "
             "piecewise linear, as a Laplacian prior gives in one dimension.",
    "fig15": "The same two points, but now the Gaussian prior is on P itself (l2 = 1), solved by the paper's "
             "massive relaxation. The peak is again near 0.6, yet smoothing acts less on small probabilities, so "
             "the valleys of L are deeper. Where the data pull hard enough, P is exactly 0: the bound P >= 0 is "
             "active, and the solver reaches that constrained minimum.",
    "fig16": "Fig 14 with a (-Delta^3) prior (l6 = 0.01) instead of -Delta. A third-order prior on L favours L close "
             "to quadratic, i.e. Gaussian-like densities in y. Compare the regression curve with Fig 14: it is "
             "rounder.",
    "fig17": "Fig 15 with a (-Delta^3) prior (l6 = 0.1) on P. The prior now favours P close to quadratic, so the "
             "density and the regression curve are rounder than in Fig 15, while exact zeros of P remain. Massive "
             "relaxation needs many small steps here: watch the energy trace flatten.",
    "fig21": "Fifty points sampled from the true density (two crossing Gaussian ridges) and a zero-mean "
             "smoothness prior on L, lambda = 0.5, solved by massive relaxation from a uniform L. Without any "
             "template the prior only asks for smoothness, so the two ridges must be found from the data alone. "
             "Compare the test error with the truth's own 2.23.",
    "fig22": "Fig 21's problem from the kernel start instead of uniform L. The paper uses this setting to compare "
             "learning algorithms and starts: switch the solver between Newton, massive relaxation and gradient "
             "and watch how fast each energy trace falls; they all reach the same minimum.",
    "fig23": "A prior mixture: two templates t_1 and t_2 (each a guess at the density, p = 1/2 each), lambda = "
             "0.5, started at t_1. The mixing coefficients a_j show which template the solution leans on; t_1 is "
             "the better guess, so the test error ends a little lower than with the zero-mean prior of Fig 21.",
    "fig24": "As Fig 23 but started at t_2. With the paper's literal settings the mixture is saturated (each a_j "
             "is 0 or 1), so the start decides which template wins. On this data set the run leaves t_2 in the "
             "first iteration and ends in the t_1 basin, as in the paper.",
    "fig25": "As Fig 23 started from a uniform L. Compare the final density and a_j with Figs 23 and 24: the "
             "start matters for a mixture prior, because the energy can have several minima.",
    "fig26": "As Fig 23 with a stronger prior, lambda = 1. The solution is smoother and converges fast, but both "
             "the training and the test error are larger: lambda is too large and the prior overrules the data.",
    "fig27": "As Fig 23 with a weak prior, lambda = 0.1: overfitting. The training error keeps falling, while "
             "after a few iterations the test error rises even though the energy still falls. Early stopping, or "
             "a larger lambda, would generalise better.",
    "fig28": "As Fig 23 with lambda = 1.2, m^2 = 0.5, started at t_2. At the paper's beta = 1 the mixture is "
             "saturated and this run stays in the t_2 basin: a metastable solution with higher energy and test "
             "error than the t_1 solution. The 'metastable_mixture' preset lowers beta to show the decay of Fig 28.",
}


def figure_config(name: str) -> dict:
    """The JSON configuration of a paper figure (``fig14`` ... ``fig17``, ``fig21`` ... ``fig28``) or of a real data
    set (``old_faithful``, ``motorcycle``: :func:`real_data_config`)."""
    if name in REAL_DATA:
        return real_data_config(name)
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; choose one of {', '.join([*FIGURES, *REAL_DATA])} (or fig7 for "
                         f"the mixture sweep)")
    return FIGURES[name]()


DEMO_TEXT = {
    "overfitting": "Fig 27's setting: a weak prior (lambda = 0.1) with the two templates, started at t_1. The "
                   "training error keeps falling, but after a few iterations the test error against the true "
                   "density rises while the energy still falls: the solution fits the 50 points, not the density. "
                   "Raise lambda and the rise disappears.",
    "metastable_mixture": "Fig 28's setting (lambda = 1.2, m^2 = 0.5, start at t_2) at mixture temperature "
                          "beta = 0.3. The run first settles near the t_2 template (a_1 close to 0) and crawls along "
                          "for about fifteen iterations, then decays to the better solution near t_1 (a_1 -> 1) and "
                          "the test error drops from 2.90 to 2.41. At beta = 1 (the paper's literal setting) the "
                          "mixture is saturated and the run never leaves t_2; a beta sweep shows both branches, with "
                          "the t_2 branch ending near beta = 0.32.",
    "fig7": "The 0-dimensional example of [001] Fig 3 / Fig 7: two templates +1 and -1, one datum at 0.1. At "
            "small beta there is one averaged solution; above beta = 2.74 there are three, two of them stable: "
            "MAP has to choose, the exact posterior weights do not jump.",
    "old_faithful": "Real data in its own units: the Old Faithful geyser, 272 eruptions (R's faithful, Azzalini "
                    "and Bowman 1990). x is how long an eruption lasted, y how long the geyser then rested, both in "
                    "minutes. Short eruptions are followed by short waits and long by long: the ridge of the density "
                    "climbs from about 54 to about 80 minutes, and it is widest between 2.5 and 3.5 minutes, where "
                    "eruptions are rare. Lambda is chosen by the evidence on loading; move it to see the ridge blur "
                    "or break up.",
    "motorcycle": "Real data in its own units: a crash test, 133 head accelerations in g against the time after "
                  "impact in ms (R's MASS::mcycle, Silverman 1985). The mean swings down and back up, and the "
                  "spread changes with time: quiet before 14 ms, wide during the impact. A conditional density "
                  "shows both, where a regression with one noise level cannot. Lambda is chosen by the evidence "
                  "on loading.",
    "two_trends": "Regression with a rising and a falling linear template fighting over five points. Above "
                  "beta = 1.38 both trends are stable MAP solutions (hysteresis in a beta sweep), while the exact "
                  "posterior weights b_j stay smooth.",
    "local_switch": "A local prior mixture (Sect. 6.4): 40 noisy points of a unit step at x = 0.5. Every edge "
                    "between neighbouring nodes chooses between the stiff Gaussian prior and a soft one (1000 "
                    "times weaker, prior probability pi_soft = 0.05); the strip under the fit shows a_soft, the "
                    "posterior probability that an edge is soft. EM alternates the two: the labels from the "
                    "curve, then the curve from the labels. At beta = 100 (sigma = 0.1) the jump opens only at "
                    "the step, where the data ask for it. Lower beta (noisier data, hotter labels): no edge opens, "
                    "a_soft stays near its floor pi_soft sqrt(r_soft) / (...) and the step is smoothed over. "
                    "Raise it to 10^4 and the data are trusted so much that edges open at the noise too.",
    "local_hyperfield": "The step of 'local_switch' with a continuous log-stiffness per edge instead of two "
                        "labels (Sects. 5.3.3, 5.6): the strip shows theta, the log of each edge's stiffness "
                        "relative to the Gaussian prior. A smoothness hyperprior (gamma_theta, mu_theta) ties "
                        "neighbouring edges: theta dips to about -3 at the step and rises towards "
                        "1 / (2 gamma_theta mu_theta) = 0.5 where the curve is flat. A weak hyperprior lets it run "
                        "away there, and the solver says so.",
}


def metastable_mixture_config() -> dict:
    """Fig 28 at beta = 0.3, just below the fold (beta ~ 0.32) where the t_2 branch of the beta sweep ends: the
    run sits near t_2 and then decays to the t_1 basin (mixing.detect_plateaus flags iterations ~6-21)."""
    cfg = figure_config("fig28")
    cfg["beta"] = 0.3
    cfg["solver"]["max_iter"] = 300
    return cfg


def local_switch_config(local_type: str = "switch") -> dict:
    """The step demo of a local prior (digest 1A/1B): 101 Neumann nodes on [0, 1], a unit step after x = 0.5 (the
    node at 0.5 counts as before it), 40 distinct nodes drawn by ``np.random.default_rng(0).choice(101, 40,
    replace=False)``, then y = step + 0.1 N(0, 1) from the same generator; beta = 100 = 1/sigma^2 (sigma = 0.1) and
    lambda = 0.1, l2 = 1: a Gaussian stiffness per edge of beta lambda hx = 0.1, the digest's kappa_stiff.
    ``"switch"``: filter switching between that stiffness (r = 1) and a soft one (r = 0.001), pi_soft = 0.05;
    ``"hyperfield"``: a log-stiffness per edge about it (theta0 = 0, gamma_theta = mu_theta = 1).  The truth is the
    step on the nodes (the test error)."""
    rng = np.random.default_rng(0)
    idx = rng.choice(101, 40, replace=False)
    nodes = np.linspace(0.0, 1.0, 101)
    truth = (nodes > 0.5).astype(float)
    y = truth[idx] + 0.1 * rng.standard_normal(40)
    local = ({"type": "switch", "stiffness": [1.0, 0.001], "pi": [0.95, 0.05]} if local_type == "switch" else
             {"type": "hyperfield", "theta0": 0.0, "gamma_theta": 1.0, "mu_theta": 1.0})
    return {"model": "regression", "grid": {"x": {"min": 0.0, "max": 1.0, "n": 101, "boundary": "neumann"}},
            "data": [[float(nodes[i]), float(v)] for i, v in zip(idx, y)],
            "prior": {"lambda": 0.1, "l0": 0.0, "l2": 1.0, "l4": 0.0, "l6": 0.0, "local": local, "cuts": []},
            "templates": [{"kind": "constant", "value": 0.0}], "weights": [1.0], "beta": 100.0,
            "solver": {"method": "newton", "init": "kernel", "min_iter": 1, "max_iter": 300, "tol": 1e-10},
            "truth": truth.tolist()}


# --------------------------------------------------------------------------------------------------------------
# robust regression (Sects. 6.5 and 3.7.4, Figs 5 and 12): the step with an outlier of scripts/robust_step_demo.py
# --------------------------------------------------------------------------------------------------------------
def robust_prior_config() -> dict:
    """The step-with-outlier demo (:func:`bftcore.models.robust.step_outlier_data`: a unit step at x = 0.5, 40 points
    with noise 0.1 and one outlier y = 3 at x = 0.2) as a robust regression document: the demo's case
    ``insensitive_cup`` in document units (:func:`bftcore.foundations.config._robust`).  beta = 100 (sigma = 0.1, the
    noise), lambda = 0.01 with l2 = 1 (the demo's Gaussian prior, ``lambda hx sum (h')^2 / 2`` over sigma^2), a cup
    with a = 1 (the Gaussian prior's curvature near 0), b = 2 (a difference of two noise widths between neighbouring
    nodes is half saturated: the demo's slope 20 = 2 sigma / hx) and gamma = 2, and the epsilon-insensitive data term
    with eps = 1 (a tube of one noise width).  The template is 0 (the demo's)."""
    axis, data, _ = step_outlier_data()
    return {"model": "regression",
            "grid": {"x": {"min": axis.min, "max": axis.max, "n": axis.n, "boundary": axis.boundary}},
            "data": data, "labels": {"x": "x", "y": "y (a unit step, one outlier at x = 0.2)"},
            "prior": {"lambda": 0.01, "l0": 0.0, "l2": 1.0, "l4": 0.0, "l6": 0.0,
                      "potential": {"name": "cup", "a": 1.0, "b": 2.0, "gamma": 2.0, "s0": 0.0}},
            "data_term": {"name": "insensitive", "eps": 1.0},
            "templates": [{"kind": "constant", "value": 0.0}], "weights": [1.0], "beta": 100.0,
            "truth": {"kind": "array", "values": step_outlier_data()[2].tolist()},
            "solver": {"method": "irls", "max_iter": 500, "tol": 1e-10}}


DEMO_TEXT["robust_prior"] = (
    "A unit step at x = 0.5, forty points with noise 0.1, and one outlier y = 3 at x = 0.2. The data term is "
    "Vapnik's epsilon-insensitive error (a tube of one noise width, linear outside it), so the outlier pulls with a "
    "bounded force: the fit at x = 0.2 stays near the step's 0 (about 0.16, where the Gaussian prior with the "
    "Gaussian error gives 1.13). The prior is a cup (Fig 12): it smooths small differences like the Gaussian prior "
    "but costs at most a fixed amount per edge, so the jump at 0.5 stays sharper (its largest step between "
    "neighbouring nodes 0.30, against 0.21). Watch the energy fall over some three hundred IRLS steps. Then switch "
    "the data term to gaussian: the cup alone does not ignore the outlier, it follows it with a plateau near 1.5 "
    "bounded by two edges.")


def _catalogue() -> dict:
    out = {name: (figure_config(name), FIGURE_NOTES[name]) for name in FIGURES}
    out["fig7"] = (fig7_config(), DEMO_TEXT["fig7"])
    out["overfitting"] = (figure_config("fig27"), DEMO_TEXT["overfitting"])
    out["metastable_mixture"] = (metastable_mixture_config(), DEMO_TEXT["metastable_mixture"])
    out["two_trends"] = (regression_presets()["two_trends"], DEMO_TEXT["two_trends"])
    out["local_switch"] = (local_switch_config("switch"), DEMO_TEXT["local_switch"])
    out["local_hyperfield"] = (local_switch_config("hyperfield"), DEMO_TEXT["local_hyperfield"])
    out["robust_prior"] = (robust_prior_config(), DEMO_TEXT["robust_prior"])
    for name in REAL_DATA:
        out[name] = (real_data_config(name), DEMO_TEXT[name])
    return out


#: What each preset shows, in a few words: the preset menu's label (the menu's values stay the names).
TITLES = {
    "fig14": "Fig 14: two points, smoothness prior on ln P",
    "fig15": "Fig 15: two points, prior on P itself (P ≥ 0 active)",
    "fig16": "Fig 16: two points, third-order prior on ln P",
    "fig17": "Fig 17: two points, third-order prior on P",
    "fig21": "Fig 21: 50 points, smoothness prior, no template",
    "fig22": "Fig 22: Fig 21 from the kernel start: compare solvers",
    "fig23": "Fig 23: mixture of two templates, started at t₁",
    "fig24": "Fig 24: mixture started at t₂: the start decides",
    "fig25": "Fig 25: mixture started from a uniform L",
    "fig26": "Fig 26: too large λ: the prior overrules the data",
    "fig27": "Fig 27: overfitting with too small λ",
    "fig28": "Fig 28: stuck in the metastable t₂ solution",
    "overfitting": "Overfitting: the test error rises while the energy falls",
    "metastable_mixture": "Metastability: a plateau near t₂, then decay to t₁",
    "fig7": "Fig 7 [001]: one datum, two templates, a bifurcation in β",
    "two_trends": "Two linear trends: hysteresis of a regression mixture",
    "local_switch": "Local prior mixture: a jump opens only where the data ask",
    "local_hyperfield": "Local stiffness hyperfield: the log-stiffness dips at the step",
    "robust_prior": "Robust prior and data term: the fit ignores the outlier, keeps the jump",
    "old_faithful": "Old Faithful: waiting time against eruption length (min)",
    "motorcycle": "Motorcycle crash test: head acceleration (g) against time (ms)",
}

#: The preset menu's chapters (of the paper, Sect. 7.4, and of [001]), in the menu's order: title -> preset names.
#: Every preset is in exactly one.
GROUPS = {
    "§7.4.1 Gaussian prior (Figs 14–17, 21–22)": ["fig14", "fig15", "fig16", "fig17", "fig21", "fig22"],
    "§7.4.2 Gaussian mixture prior (Figs 23–28)": ["fig23", "fig24", "fig25", "fig26", "fig27", "fig28"],
    "Teaching demos: overfitting, metastability": ["overfitting", "metastable_mixture"],
    "Regression with mixture priors [001]": ["fig7", "two_trends"],
    "§6.4, §5.3.3 Local priors: switches and hyperfields": ["local_switch", "local_hyperfield"],
    "§6.5, §3.7.4 Non-quadratic potentials, robust data terms": ["robust_prior"],
    "Real data in its own units": ["old_faithful", "motorcycle"],
}


#: name -> (configuration, two or three sentences for a class): every preset the CLI and the dashboard offer.
#: Treat it as read-only; a caller that changes a configuration copies it first.
PRESETS = _catalogue()


def random_problem(n: int, prior: dict, seed: int = 0, points: int = 200) -> dict:
    """A density problem on an n x n mesh of unit spacing (x Neumann, y periodic) with ``points`` data: x uniform,
    y Gaussian around the middle (sd n/8); Newton from the kernel start; ``prior`` adds to lambda = lambda_x =
    lambda_y = 1 with every order 0.  The benchmark's cases and the tests of the fast paths use it."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1, n, points)
    y = np.clip(rng.normal((n + 1) / 2, n / 8, points), 1, n)
    pr = {"field": "L", "lambda": 1.0, "lambda_x": 1.0, "lambda_y": 1.0, "l0": 0.0, "l2": 0.0, "l4": 0.0,
          "l6": 0.0, **prior}
    return {"model": "density",
            "grid": {"x": {"min": 1, "max": n, "n": n, "boundary": "neumann"},
                     "y": {"min": 1, "max": n, "n": n, "boundary": "periodic"}},
            "data": np.column_stack([x, y]).tolist(), "prior": pr,
            "solver": {"method": "newton", "init": "kernel", "init_mass2": 0.1, "min_iter": 1, "max_iter": 200,
                       "tol": 1e-9}}


