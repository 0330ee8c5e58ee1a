"""Regression documents with a local prior (``prior.local``, ``prior.cuts``) as problem kinds: the route document ->
kind -> :mod:`bftcore.models.local_priors` -> a :class:`LocalRegressionFit` with the per-edge labels.

The document (CONVENTIONS.md §4, ``"model": "regression"``, validated by
:func:`bftcore.foundations.config.validate_config`; see its ``_local_prior`` for the keys) keeps every key's meaning:
``beta`` is 1/sigma^2 of the noise *and* the temperature of the labels ([001] eqs. (6), (7), as for a regression
mixture), ``lambda`` and ``l2`` the Gaussian prior ``beta lambda hx l2 / 2 sum_e (D h)_e^2`` that m = 1 is.  So the
per-edge stiffness of that Gaussian prior, in the energy of :mod:`bftcore.models.local_priors` (data term
``1/2 sum (h - y)^2 / sigma^2``), is ``kappa_0 = beta lambda hx l2``; the document's hyperparameters are given
relative to it and so are pure numbers, the same in any units (x -> a x + b, y -> c y + d):

* switch: alternative k has ``beta kappa_k = r_k kappa_0`` (``prior.local.stiffness`` = r_k), passed to the solver
  as its label temperature ``beta`` and ``kappa_k = r_k lambda hx l2``: the ln Z_k = -1/2 ln kappa_k differ by
  -1/2 ln r_k, a pure number;
* hyperfield: the solver's theta_0 is ``ln kappa_0 + prior.local.theta0``, and the result reports theta - ln kappa_0
  (``log_stiffness``: the log of the stiffness relative to the document's Gaussian one).

The document's one template t (a constant for the step demo) is the prior mean: the local prior acts on
D (h - t), so the solver fits h - t to the data y_d - t(x_d) (exact: both energies are functions of h - t) and the
template is added back.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from ..foundations.config import ConfigError, MapOnlyKind, checked, grid_from_config
from ..foundations.records import FitResult, Record, finite_list
from ..foundations.templates import template_values
from . import local_priors as lp
from .regression import RegressionFit, RegressionModel

#: The mixing coefficients a_j of the document's one template (a local prior takes one): the labels are per edge.
ONE_TEMPLATE = np.ones(1)
#: Largest chain whose posterior draws (:meth:`LocalRegressionKind.posterior_summary`) are made with a dense Cholesky.
DENSE_DRAWS_MAX_NODES = 2000


@dataclass
class LocalRecord(Record):
    """A :class:`Record` of a local-prior regression: ``local`` holds the per-edge labels after this sweep, the
    responsibilities a_k(e) (m x edges) of a switch or the log-stiffness theta(e) - ln kappa_0 (1 x edges) of a
    hyperfield; ``mixing`` is the one template's a_1 = 1 (the labels are per edge, not a global mixture)."""

    local: np.ndarray | None = None
    #: "switch" or "hyperfield": what ``local`` holds.
    local_type: str = ""


@dataclass
class _Problem:
    """A validated local-prior document made ready for the solver."""

    cfg: dict
    regression: RegressionModel
    model: object          # lp.LocalMixture or lp.Hyperfield
    template: np.ndarray   # the document's template on the nodes
    kappa0: float          # the per-edge stiffness of the document's Gaussian prior, beta lambda hx l2

    @property
    def type(self) -> str:
        return self.cfg["prior"]["local"]["type"]


def _problem(config: dict) -> _Problem:
    cfg = checked(config)
    if "local" not in cfg["prior"]:
        raise ValueError("this document has no prior.local or prior.cuts: it is a plain regression")
    reg = RegressionModel.from_config(cfg)
    axis = grid_from_config(cfg).x
    pr, beta = cfg["prior"], float(cfg["beta"])
    t = template_values(cfg["templates"][0], axis.nodes)
    pts = np.asarray(cfg["data"], dtype=float).reshape(-1, 2)
    x, y = pts[:, 0], pts[:, 1] - t[axis.snap(pts[:, 0])]
    sigma = 1.0 / np.sqrt(beta)
    scale = pr["lambda"] * axis.h * pr["l2"]
    kappa0 = beta * scale
    spec = pr["local"]
    model: object
    if spec["type"] == "switch":
        model = lp.local_mixture(x, y, axis, sigma, scale * np.asarray(spec["stiffness"]), spec["pi"], beta,
                                 cuts=pr["cuts"])
    else:
        model = lp.hyperfield(x, y, axis, sigma, np.log(kappa0) + spec["theta0"], spec["gamma_theta"],
                              spec["mu_theta"], cuts=pr["cuts"])
    return _Problem(cfg, reg, model, t, kappa0)


def _sweeps(p: _Problem, init=None):
    """``(iteration, h, labels, energy, step, converged)`` per EM sweep (switch) or alternation (hyperfield)."""
    so = p.cfg["solver"]
    t = p.template
    start = None if init is None else np.asarray(init, dtype=float) - t
    if isinstance(p.model, lp.LocalMixture):
        m = p.model
        for it, phi, step, conv in lp.em_sweeps(m, start, so["max_iter"], so["tol"]):
            yield it, phi + t, m.responsibilities(phi), m.value(phi), step, conv
    else:
        hf = p.model
        assert isinstance(hf, lp.Hyperfield)
        theta0 = None
        if start is not None:  # a warm start: theta of that field (the theta step from theta_0), then its h
            if start.shape != (hf.chain.n,):
                raise ValueError(f"init must have one value per x node ({hf.chain.n}), got shape {start.shape}")
            theta0, _ = hf.theta_step(np.full(hf.chain.D.shape[0], hf.theta0), start)
        for it, phi, theta, step, conv in lp.hyperfield_sweeps(hf, theta0, so["max_iter"], so["tol"]):
            yield it, phi + t, (theta - np.log(p.kappa0))[None, :], hf.value(phi, theta), step, conv


def _residual(p: _Problem, h) -> float:
    """max |dE/dh| of a switch's energy at h (its stationarity); 0 for a hyperfield, whose h solves its equation
    exactly at every alternation (the theta equation's residual is the Newton step's business)."""
    if isinstance(p.model, lp.LocalMixture):
        return float(np.max(np.abs(p.model.gradient(np.asarray(h) - p.template))))
    return 0.0


def _records(p: _Problem, init=None) -> Iterator[LocalRecord]:
    t0 = time.perf_counter()
    reg = p.regression
    for it, h, labels, energy, step, conv in _sweeps(p, init):
        yield LocalRecord(iteration=it, energy=float(energy), train_error=reg.train_error(h),
                          test_error=reg.test_error(h), mixing=ONE_TEMPLATE, step=0.0 if it == 0 else step,
                          residual=_residual(p, h), method="em" if p.type == "switch" else "alternation",
                          change=step, converged=bool(conv), elapsed_s=time.perf_counter() - t0, h=h, field=h,
                          local=labels, local_type=p.type)


@dataclass
class LocalRegressionFit(RegressionFit):
    """A regression fit with a local prior: the records (the last with ``h`` and ``local``), the regression model of
    the document (its errors, its nodes), and the chain's edges (midpoints ``edge_x``) the labels live on."""

    edge_x: np.ndarray = field(default_factory=lambda: np.zeros(0))
    local_type: str = "switch"
    cuts: tuple = ()

    @property
    def labels(self) -> np.ndarray:
        """a_k(e) (switch, m x edges) or theta(e) - ln kappa_0 (hyperfield, 1 x edges) at the solution."""
        assert isinstance(self.last, LocalRecord) and self.last.local is not None
        return self.last.local

    def summary(self) -> dict:
        return {"energy": float(self.last.energy), "mixing": ONE_TEMPLATE.tolist(),
                "test_error": self.model.test_error(self.h), "converged": self.converged, "stable": None}

    def to_document(self) -> dict:
        """The regression result document (CONVENTIONS.md §4) with ``energy`` the local prior's energy at h and
        ``mixing`` [1] (one template), without ``exact`` (no closed form) and ``stable`` None, plus ``local``:
        ``{"type", "edge_x", "cuts"}`` and ``"responsibilities"`` (a_k(e), one list per alternative, eq. (588)) for a
        switch or ``"log_stiffness"`` (theta(e) - ln kappa_0: the log of the stiffness relative to the document's
        Gaussian one) for a hyperfield."""
        h, model = self.h, self.model
        local = {"type": self.local_type, "edge_x": self.edge_x.tolist(), "cuts": list(self.cuts)}
        if self.local_type == "switch":
            local["responsibilities"] = finite_list(self.labels)
        else:
            local["log_stiffness"] = finite_list(self.labels[0])
        return {"model": "regression", "x": model.nodes.tolist(), "beta": self.energy.beta,
                "energy": float(self.last.energy), "train_error": model.train_error(h),
                "test_error": model.test_error(h), "iterations": int(self.last.iteration),
                "converged": self.converged, "mixing": ONE_TEMPLATE.tolist(), "h": h.tolist(),
                "history": [r.summary() for r in self.history], "elapsed_s": self.elapsed_s,
                "stable": None, "local": local}


def solve(config: dict, init=None) -> LocalRegressionFit:
    """Fit a regression document with a local prior to the end of its sweeps (``solver.max_iter``, ``solver.tol``:
    the relative step of h, or of theta for a hyperfield)."""
    t0 = time.perf_counter()
    p = _problem(config)
    history: list[Record] = list(_records(p, init))
    chain = p.model.chain  # type: ignore[attr-defined]
    return LocalRegressionFit(history, time.perf_counter() - t0, p.regression, p.regression.energy(p.cfg["beta"]),
                              bool(history[-1].converged), None, chain.edge_x, p.type, tuple(p.cfg["prior"]["cuts"]))


class LocalRegressionKind(MapOnlyKind):
    """A regression with a local prior of one type (``"switch"``, ``"hyperfield"``) as a problem kind
    (:class:`bftcore.foundations.config.ProblemKind`), registered in :mod:`bftcore.models.problems` after the plain
    regression, so that it is asked first; it claims the documents whose ``prior.local.type`` is its type."""

    model: str = "regression"
    y_on_grid: bool = False
    default_templates: tuple[str, ...] = ("constant",)
    result_type: type[FitResult] = LocalRegressionFit
    drawn_as: str = "curve"
    no_evidence = ("the evidence of a regression with a local prior (prior.local, prior.cuts) is not implemented (the "
                   "sum over the labels has no closed form); remove prior.local/cuts for the Gaussian evidence")

    def __init__(self, local_type: str):
        self.local_type = local_type
        self.name = f"regression-local-{local_type}"
        self.claims: dict[str, object] = {"prior.local.type": local_type}

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["x"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        return False

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        yield from _records(_problem(cfg), init)

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        return solve(cfg, init)

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        """``n`` draws of h from the Gaussian at the solution's final a-weighted operator (switch) or stiffness
        e^theta (hyperfield), ``K_D + D^T diag(stiffness) D``: the posterior of h *given* the labels, not the
        exact posterior (which mixes over them); ``"kind": "conditional"`` says so."""
        if cfg["grid"]["x"]["n"] > DENSE_DRAWS_MAX_NODES:
            raise ConfigError(f"posterior draws of a local prior use a dense Cholesky, for at most "
                              f"{DENSE_DRAWS_MAX_NODES} x nodes; use a coarser grid")
        p = _problem(cfg)
        fit = solve(cfg)
        chain = p.model.chain  # type: ignore[attr-defined]
        if isinstance(p.model, lp.LocalMixture):
            stiffness = p.model.beta * (fit.labels * p.model.kappas[:, None]).sum(axis=0)
        else:
            stiffness = p.kappa0 * np.exp(fit.labels[0])
        A = (chain.KD + chain.D.T @ np.diag(stiffness) @ chain.D)
        L = np.linalg.cholesky(np.asarray(A.todense() if hasattr(A, "todense") else A))
        z = rng.standard_normal((chain.n, n))
        draws = fit.h[:, None] + sla.solve_triangular(L.T, z, lower=False)
        return {"x": chain.axis.nodes.tolist(), "draws": draws.T.tolist(), "kind": "conditional"}
