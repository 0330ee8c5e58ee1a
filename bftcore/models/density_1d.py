"""The one-dimensional density p(y) as its own problem kind: its problem, energy, Newton preconditioner, result and
registration (one line in :mod:`bftcore.models.problems`).  The proof that a new kind is one module plus its
registration.

Which documents: ``"model": "density"`` whose grid has one x node (a grid with ``y`` and no ``x``, as the gate
reads it, or an explicit one-node x axis) and a prior on L = ln P.  The document and the result document stay those
of CONVENTIONS.md (§4: ``P`` and ``L`` as one row, ``lagrange_multiplier`` one number): the kind changes how the
problem is solved, not what the user writes or reads.

The field is the vector L(y) of the ``ny`` nodes, normalised by parameterisation, ``L <- L - ln sum_j e^L_j hy``
(eq. (146) on one axis).  The energy (eqs. (108)-(141), (713)-(718) with one x node), evaluated *at* a field (NIFTy's
``Energy``: an immutable point with ``value``, ``gradient``, ``hessp`` and ``metric``)::

    E(L) = -(N, L) + (lambda hy / 2)(L - t, K (L - t))        (a mixture: -(1/beta) ln sum_j p_j e^{-beta lambda E_0j})
    K    = lambda_y K_Y + lambda_x l0 I

``K_Y`` is the y axis operator of eq. (700) with the boundary of the y axis (:func:`prior_root` holds it as a
root, ``K = G^T G``); ``lambda_x l0 I`` is the x part of eq. (699) on one node, whose Laplacian is zero, so the
kind solves the same equation the conditional density does on a one-node x axis (tests/test_density_1d.py compares
the two).

The minimiser is the package's (:func:`bftcore.foundations.solvers.iterate` with
:class:`bftcore.foundations.solvers.DescentStep`: Newton, massive relaxation or gradient, the line search and the
stopping rule).  What is the kind's own is the Newton preconditioner: the exact solve of the bordered system of the
Gauss-Newton Hessian, ``[[lambda hy K + diag(max(Lambda, 0) P hy), V], [V^T, 0]]`` with ``V = P hy``, by one sparse LU
of a banded matrix (O(ny) for the band of K).  With one Gaussian prior and ``Lambda >= 0`` it is the Hessian itself on
the tangent space of the normalisation, so CG takes one iteration; a mixture's rank-m term takes at most m more.

Decisions:

* A prior on P (``"field": "P"``) stays with the conditional density kind (:data:`bftcore.models.problems.DENSITY`): the
  active-set method of :mod:`bftcore.models.active_set` is written for an ``(nx, ny)`` field.  :meth:`Density1D.claims`
  leaves those documents to it.
* The Laplace evidence path and the posterior summary are :mod:`bftcore.models.evidence`'s on the one-column view (one
  implementation of the Laplace evidence in the package; the kind hands the same document to it).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from functools import cached_property

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spl

from ..foundations import metrics
from ..foundations.config import checked, grid_from_config
from ..foundations.grid import Axis, Grid
from ..foundations.mixing import check_beta, check_weights, mixing_coefficients, mixture_energy
from ..foundations.operators import SingularOperatorError, axis_root
from ..foundations.records import FitResult, Record
from ..foundations.solvers import iterate as solver_iterate
from ..foundations.templates import paper_true_density, template_field
from . import evidence
from .density import DensityFit, lowest_tangent_eigenvalue, run_to_end

EMPIRICAL_EPS = 1e-10  # epsilon of the delta-peak start ln(N/n + eps), Fig. 22 (as bftcore.models.density)


def normalise(L: np.ndarray, hy: float) -> np.ndarray:
    """``L - ln sum_j exp(L_j) hy``: the normalised log-density of a field on one axis."""
    m = float(np.max(L))
    return L - (m + np.log(np.sum(np.exp(L - m)) * hy))


def prior_root(cfg: dict, y: Axis) -> sp.csr_matrix:
    """G with ``G^T G = K = lambda_y K_Y + lambda_x l0 I`` of a validated document (module text): the root of the
    y axis operator (:func:`bftcore.foundations.operators.axis_root`) and the x part of eq. (699) on one node.  The
    energy is ``|G (L - t)|^2`` and K acts as ``G^T (G v)``: differences first, so a stiff prior (l6 on a fine axis,
    entries of K near 1e6) does not lose the energy's last digits to cancellation in ``K L``."""
    pr = cfg["prior"]
    l0, l2, l4, l6 = pr["l0"], pr["l2"], pr["l4"], pr["l6"]
    n = y.n
    parts = [np.sqrt(pr["lambda_y"]) * axis_root(y, l0, l2, l4, l6)]
    if pr["lambda_x"] * l0 > 0:  # the x part of eq. (699) on one node
        parts.append(np.sqrt(pr["lambda_x"] * l0) * sp.identity(n, format="csr"))
    G = sp.csr_matrix(sp.vstack(parts))
    return G if G.shape[0] else sp.csr_matrix((1, n))


class Energy:
    """E(L) of a 1-D density (module text).  ``at(L)`` is the energy at a normalised field; the rest is what the
    package's minimiser asks of an energy (:mod:`bftcore.foundations.solvers`)."""

    field = "L"
    minimiser_step = None
    newton_loose_until = 1e-10  # as the conditional density's E_L
    saddle_escape = True

    def __init__(self, y: Axis, N: np.ndarray, G: sp.csr_matrix, lam: float, templates: np.ndarray,
                 weights, beta: float):
        assert np.isfinite(lam) and lam > 0, f"lambda must be > 0 (the gate says so by name), got {lam!r}"
        self.y, self.hy, self.N, self.lam = y, y.h, np.asarray(N, dtype=float), float(lam)
        self.G, self.GT = G, G.T.tocsr()
        self.K = (self.GT @ G).tocsr()  # assembled for the factorisations only
        self.templates = np.asarray(templates, dtype=float).reshape(-1, y.n)
        self.weights = check_weights(weights, len(self.templates))
        self.beta = check_beta(beta)
        self._massive: dict[float, spl.SuperLU] = {}

    def apply_K(self, v: np.ndarray) -> np.ndarray:
        """``K v`` as ``G^T (G v)``."""
        return self.GT @ (self.G @ v)

    @property
    def m(self) -> int:
        return len(self.templates)

    def at(self, L: np.ndarray) -> "Point":
        return Point(self, np.asarray(L, dtype=float))

    def normalise(self, L: np.ndarray) -> np.ndarray:
        return normalise(L, self.hy)

    @staticmethod
    def to_L(phi: np.ndarray) -> np.ndarray:
        return phi

    @staticmethod
    def to_P(phi: np.ndarray) -> np.ndarray:
        return np.exp(phi)

    def massive_solve(self, r: np.ndarray, mass2: float) -> np.ndarray:
        """``(K + m^2 I)^{-1} r``, the massive-relaxation learning matrix (632), by a sparse LU kept per m^2."""
        if mass2 not in self._massive:
            A = sp.csc_matrix(self.K + mass2 * sp.identity(self.y.n))
            try:
                self._massive[mass2] = spl.splu(A)
            except RuntimeError as e:  # "Factor is exactly singular"
                raise SingularOperatorError(f"K + m^2 I is singular ({e}); use a mass m^2 > 0") from None
        return self._massive[mass2].solve(np.asarray(r, dtype=float))

    def newton_preconditioner(self, point: "Point", previous=None, strong: bool = False, cache: dict | None = None):
        """The exact solve of the bordered Gauss-Newton system at ``point`` (module text); built anew at every
        Newton step (one banded LU of ny + 1 unknowns)."""
        n = self.y.n
        V = point.P * self.hy
        lamX = max(float(point.lagrange_multiplier[0]), 0.0)
        M = self.lam * self.hy * self.K + sp.diags(lamX * V)
        # a flat direction of K that the data do not see (no data at all) is held by a tiny multiple of diag(V)
        M = M + sp.diags(1e-12 * max(1.0, abs(M).max()) * V)
        A = sp.bmat([[M, sp.csr_matrix(V[:, None])], [sp.csr_matrix(V[None, :]), None]], format="csc")
        lu = spl.splu(A)

        def solve(r: np.ndarray) -> np.ndarray:
            return lu.solve(np.append(r, 0.0))[:n]
        return solve


@dataclasses.dataclass(frozen=True)
class Point:
    """The energy at one normalised field L (immutable; its parts are computed once, when first asked)."""

    energy: Energy
    phi: np.ndarray

    @cached_property
    def _prior(self):
        """Prior energy, mixing a_j and ``u_j = hy K (L - t_j)``."""
        E = self.energy
        w = (E.G @ (self.phi[None] - E.templates).T).T  # G (L - t_j), one row per component
        u = E.hy * (E.GT @ w.T).T
        lamE0 = E.lam * 0.5 * E.hy * np.einsum("jk,jk->j", w, w)
        if E.m == 1:
            return float(lamE0[0]), np.ones(1), u
        return float(mixture_energy(lamE0, E.weights, E.beta)), mixing_coefficients(lamE0, E.weights, E.beta), u

    @property
    def mixing(self) -> np.ndarray:
        """Mixing coefficients a_j, eq. (718)."""
        return self._prior[1]

    @cached_property
    def P(self) -> np.ndarray:
        return np.exp(self.phi)

    @cached_property
    def value(self) -> float:
        """``-(N, L) + prior``, eqs. (109), (713)."""
        return float(-np.dot(self.energy.N, self.phi) + self._prior[0])

    @cached_property
    def _r(self) -> np.ndarray:
        _, a, u = self._prior
        return -self.energy.N + self.energy.lam * (a @ u)

    @cached_property
    def lagrange_multiplier(self) -> np.ndarray:
        """Lambda = N - lambda hy 1^T K (L - t̄), eqs. (137), (717): one number (per x node of the document)."""
        return np.array([-float(np.sum(self._r))])

    @cached_property
    def gradient(self) -> np.ndarray:
        """``(I - V 1^T)(-N + lambda hy K (L - t̄))`` with ``V = P hy`` (141)/(716)."""
        return self._r + self.P * self.energy.hy * self.lagrange_multiplier[0]

    def hessp(self, v: np.ndarray, convexified: bool = False) -> np.ndarray:
        """``J^T M J v`` (160) with ``J = I - 1 V^T`` and ``M = lambda hy K - beta lambda^2 sum_j a_j du_j du_j^T +
        Lambda diag(V)``; ``convexified=True`` is the Gauss-Newton form (:meth:`metric`)."""
        E = self.energy
        V = self.P * E.hy
        Jv = v - np.dot(V, v)
        lamX = self.lagrange_multiplier[0]
        MJv = E.lam * E.hy * E.apply_K(Jv)
        if convexified:
            MJv = MJv + max(lamX, 0.0) * V * Jv
        else:
            MJv = MJv + lamX * V * Jv
            if E.m > 1:
                _, a, u = self._prior
                du = u - (a @ u)[None]
                MJv = MJv - E.beta * E.lam ** 2 * ((a * (du @ Jv)) @ du)
        return MJv - V * np.sum(MJv)

    def metric(self, v: np.ndarray) -> np.ndarray:
        """The positive semi-definite approximation of the Hessian (NIFTy's ``metric``): the Gauss-Newton form,
        ``Lambda`` clipped at 0 and the mixture's negative term dropped."""
        return self.hessp(v, convexified=True)

    @property
    def residual(self) -> float:
        """Stationarity residual ``max |gradient|``."""
        return float(np.max(np.abs(self.gradient)))


@dataclasses.dataclass
class Problem:
    """Everything built from a 1-D density document.  ``grid`` is the document's (one x node): the result speaks
    it; ``y``, ``N``, ``K`` and ``energy`` are the kind's own, on the y axis alone."""

    config: dict
    grid: Grid
    y: Axis
    N: np.ndarray
    energy: Energy
    P_true: np.ndarray | None


def build(config: dict) -> Problem:
    cfg = checked(config)
    grid = grid_from_config(cfg)
    y = grid.y
    pr = cfg["prior"]
    templates = [template_field(t, grid, "L")[0] for t in cfg["templates"]] or [np.zeros(y.n)]
    energy = Energy(y, grid.counts(cfg["data"])[0], prior_root(cfg, y), pr["lambda"], np.array(templates),
                    cfg["weights"] or None, cfg["beta"])
    P_true = paper_true_density(grid) if cfg["truth"] == "paper" else None
    return Problem(cfg, grid, y, energy.N, energy, P_true)


def initial_field(problem: Problem, init=None) -> np.ndarray:
    """The start (Sect. 7.3), as :func:`bftcore.models.density.initial_field` on one axis: uniform, kernel, empirical, a
    template, or an array (a warm start, of ny values or one row of them)."""
    cfg, y, N = problem.config, problem.y, problem.N
    if init is not None and not isinstance(init, str):
        L = np.asarray(init, dtype=float)
        if L.size != y.n:
            raise ValueError(f"warm-start field has shape {L.shape}, the grid has {y.n} y nodes")
        if not np.all(np.isfinite(L)):
            raise ValueError("warm-start field L contains NaN or infinite values")
        return normalise(L.reshape(y.n), y.h)
    init = cfg["solver"]["init"] if init is None else init
    n = max(float(N.sum()), 1.0)
    if init == "uniform":
        return normalise(np.zeros(y.n), y.h)
    if init == "empirical":
        return normalise(np.log(N / n + EMPIRICAL_EPS), y.h)
    if init == "kernel":  # C~ P~_emp (676), (698), floored so that ln P exists
        emp = N / (n * y.h) if N.sum() > 0 else np.full(y.n, 1.0 / (y.n * y.h))
        P = problem.energy.massive_solve(emp, cfg["solver"]["init_mass2"])
        P = np.maximum(P, 1e-12 * np.max(P))
        return normalise(np.log(P), y.h)
    if init.startswith("template:"):
        return normalise(problem.energy.templates[int(init.split(":")[1])], y.h)
    raise ValueError(f"unknown init {init!r}")


def records(problem: Problem, init=None) -> Iterator[Record]:
    """A :class:`~bftcore.foundations.records.Record` per iteration, its ``L`` and ``P`` as one row of the document's
    grid."""
    cfg, grid, E = problem.config, problem.grid, problem.energy
    so = cfg["solver"]
    N2 = problem.N[None]
    for rec in solver_iterate(E, initial_field(problem, init), method=so["method"], mass2=so["mass2"],
                              min_iter=so["min_iter"], max_iter=so["max_iter"], tol=so["tol"]):
        L = rec.field[None]
        te = metrics.test_error(L, problem.P_true, grid) if problem.P_true is not None else None
        yield dataclasses.replace(rec, train_error=metrics.training_error(L, N2), test_error=te, L=L,
                                  P=np.exp(L))


def is_local_minimum(problem: Problem, L: np.ndarray, rtol: float = 1e-8) -> bool:
    """The smallest eigenvalue of the Hessian on the tangent space of the normalisation is not negative."""
    pt = problem.energy.at(np.asarray(L, dtype=float).reshape(problem.y.n))

    def mv(v):
        v = v - np.mean(v)
        w = pt.hessp(v)
        return w - np.mean(w)

    if problem.y.n < 2:
        return True
    return lowest_tangent_eigenvalue(mv, problem.y.n, rtol)


def solve(problem: Problem, init=None, callback=None, check_stability: bool = False) -> "Fit":
    history, elapsed = run_to_end(records(problem, init), callback)
    stable = is_local_minimum(problem, history[-1].field) if check_stability and history[-1].field is not None \
        else None
    return Fit(history, elapsed, problem, stable)  # type: ignore[arg-type]


class Fit(DensityFit):
    """A 1-D density fit: the conditional density's result (:class:`bftcore.models.density.DensityFit`, the result
    document of §4) of a problem of this kind."""


class Density1D:
    """The problem kind (:class:`bftcore.foundations.config.ProblemKind`), registered in
    :mod:`bftcore.models.problems`."""

    name: str = "density_1d"
    model: str = "density"
    path_parameters: tuple[str, ...] = evidence.PATH_PARAMS
    has_exact: bool = False
    y_on_grid: bool = True
    default_templates: tuple[str, ...] = ()
    result_type: type[FitResult] = Fit
    drawn_as: str = "density"
    claims: dict[str, object] = {"grid.x.n": 1, "prior.field": "L"}

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["y"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        return False

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        yield from records(build(cfg), init)

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        return solve(build(cfg), init, callback, check_stability)

    def evidence_path(self, cfg: dict, param: str, values) -> dict:
        return evidence.path_document(cfg, param, values)

    def posterior_summary(self, cfg: dict, field, n: int, level: float, rng: np.random.Generator) -> dict:
        return evidence.band_summary(cfg, self.solve(cfg).field if field is None else field, n, level, rng)

    def exact(self, cfg: dict) -> dict | None:
        return None
