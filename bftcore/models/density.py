"""The conditional density p(y|x), one problem kind in one module: its energies, the problem built from a validated
document, the start of the iteration, the stream of records, the stability check, the result of a fit and the kind.

* **Energies** (CONVENTIONS.md §2), evaluated *at* a field, NIFTy style: ``energy.at(phi)`` returns an immutable point
  with ``value``, ``gradient``, ``hessp(v)``, the Lagrange multiplier ``lagrange_multiplier`` of the normalisation
  and the mixing coefficients ``mixing``.

  - :class:`LogDensityEnergy`, field L = ln P: ``E_L = -sum_data L + prior(L)``, eqs. (108)-(141), (713)-(718).  The
    solver moves in g-space (normalisation by parameterisation, eq. (146)): a step ``d`` is applied as
    ``L <- normalise(L + eta d)``; ``gradient`` is the g-gradient ``(I - P I_X) (-N + lambda K (L - t̄))`` of eq.
    (141)/(716), ``hessp`` the normalisation-consistent Hessian ``-H_g`` of eq. (160).
  - :class:`ProbabilityEnergy`, field P: ``E_P = -sum_data ln P + prior(P)``, eqs. (163)-(170), with P >= 0 and
    ``sum_j P hy = 1`` per x enforced as constraints (the active-set method of :mod:`bftcore.models.active_set`,
    which also holds the projection onto the feasible set, :func:`project_simplex`, re-exported here).

  The prior is one Gaussian ``(lambda/2)(phi - t, K (phi - t))`` or a mixture
  ``-(1/beta) ln sum_j p_j exp(-beta lambda E_0j)``, ``E_0j = 1/2 (phi - t_j, K (phi - t_j))`` (713)-(715), whose
  gradient is that of a single Gaussian with the effective template ``t̄ = sum_j a_j t_j`` (716).
* **The problem** (:func:`build_density`): grid, data counts, prior and energy of a validated document; the start
  of the iteration (Sect. 7.3, :func:`initial_field`); the records of the minimiser (:func:`records`); the result as
  arrays (:class:`DensityFit`), turned into the result document of §4 only by :meth:`DensityFit.to_document`.
* **The kind** (:class:`DensityKind`): what the dashboard, the façade and the workflows ask of the problem
  (:class:`bftcore.foundations.config.ProblemKind`); its evidence is added where the evidence is
  (:mod:`bftcore.models.problems`).

Below the evidence, the problem kinds, the workflows and the façade; above the active set, the foundations and the
minimiser.  A configuration comes in validated (:func:`bftcore.foundations.config.validate_config` is the one gate).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.fft as sfft
import scipy.linalg as sla
import scipy.sparse.linalg as spl

from ..foundations import metrics
from ..foundations.config import ConfigError, check_samples, checked, copy_document, grid_from_config
from ..foundations.grid import Grid, prolong
from ..foundations.mixing import check_beta, check_weights, mixing_coefficients, mixture_energy
from ..foundations.operators import PriorOperator, axis_symbol
from ..foundations.records import FitResult, Record, finite_list, finite_or_none
from ..foundations.solvers import iterate as solver_iterate
from ..foundations.templates import paper_true_density, template_field
from .active_set import ActiveSetStep, project_simplex
from .banded_newton import BandedNewton, BandedRun

EMPIRICAL_EPS = 1e-10  # epsilon of the delta-peak start ln(N/n + eps), Fig. 22


def normalise_log(L: np.ndarray, hy: float) -> np.ndarray:
    """Conditionally normalise a log-density: ``L - ln sum_j exp(L[i, j]) hy`` per x (eq. (146))."""
    m = L.max(axis=1, keepdims=True)  # the array methods: numpy's function wrappers cost more than 16 x 16 numbers
    return L - (m + np.log(np.exp(L - m).sum(axis=1, keepdims=True) * hy))


class Prior:
    """Gaussian prior or mixture of Gaussian priors on a field phi, eqs. (224), (713)-(718).

    ``templates`` is an ``(m, nx, ny)`` array (m = 0 means the zero template), ``weights`` the p_j, ``beta`` the
    mixture inverse temperature of CONVENTIONS.md (beta = 1 is the paper).
    """

    def __init__(self, K: PriorOperator, lam: float, templates=None, weights=None, beta: float = 1.0):
        # the gate (bftcore.foundations.config.validate_config) has checked lambda, the templates and their shapes; the
        # weight and beta rules have one home each (bftcore.foundations.mixing); here they are only asserted or applied
        assert np.isfinite(lam) and lam > 0, f"lambda must be > 0 (the gate says so by name), got {lam!r}"
        self.K, self.lam, self.grid = K, float(lam), K.grid
        self.zero_template = templates is None or len(templates) == 0
        if self.zero_template:  # whose K t is zero
            t = np.zeros((1,) + self.grid.shape)
            self.Kt = np.zeros_like(t)
        else:
            t = np.asarray(templates, dtype=float)
            assert t.ndim == 3 and t.shape[1:] == self.grid.shape and np.all(np.isfinite(t)), "templates: (m, nx, ny)"
            self.Kt = np.stack([K.apply(tj) for tj in t])
        self.templates = t
        self.weights = check_weights(weights, len(t))
        self.beta = check_beta(beta)

    @property
    def m(self) -> int:
        return len(self.templates)

    def evaluate(self, phi: np.ndarray, Kphi: np.ndarray):
        """Prior energy, component energies lambda*E_0j, mixing a_j and ``u_j = cell K (phi - t_j)``."""
        cell = self.grid.cell
        if self.m == 1:  # one Gaussian: its energy without the (1, nx, ny) stacks and einsum (a point of every step)
            u0 = cell * Kphi if self.zero_template else cell * (Kphi - self.Kt[0])
            lamE0 = self.lam * 0.5 * float(np.vdot(phi if self.zero_template else phi - self.templates[0], u0))
            return lamE0, np.array([lamE0]), np.ones(1), u0[None]
        u = cell * (Kphi[None] - self.Kt)
        E0 = 0.5 * np.einsum("jab,jab->j", phi[None] - self.templates, u)
        lamE0 = self.lam * E0
        a = mixing_coefficients(lamE0, self.weights, self.beta)
        return float(mixture_energy(lamE0, self.weights, self.beta)), lamE0, a, u


class DensityEnergy:
    """Common data of E_L and E_P: grid, data counts N, prior; and what the solver asks of every energy
    (:mod:`bftcore.foundations.solvers`): ``minimiser_step`` (None: the solver's descent step, or the step class the
    energy's constraints need), ``massive_solve`` (the massive-relaxation learning matrix), ``newton_loose_until`` and
    ``saddle_escape`` (how Newton treats this energy)."""

    field = "?"
    minimiser_step: type | None = None
    newton_loose_until = np.inf  # Newton's CG tolerance is 0.1 while |G| > this times |G0| (never, by default)
    saddle_escape = False  # Newton retries with a convexified Hessian and follows negative curvature

    def massive_solve(self, r: np.ndarray, mass2: float) -> np.ndarray:
        """``(K + m^2 I)^{-1} r``: the massive-relaxation learning matrix (632), exactly by FFT/DCT."""
        return self.prior.K.solve(r, 1.0, mass2)

    def __init__(self, grid: Grid, N: np.ndarray, prior: Prior):
        self.grid, self.N, self.prior = grid, np.asarray(N, dtype=float), prior
        if self.N.shape != grid.shape:
            raise ValueError(f"data counts have shape {self.N.shape}, grid has {grid.shape}")
        self.data_mask = self.N > 0
        self.data_index = np.flatnonzero(self.data_mask)  # flat indices of the data nodes, and their counts
        self.data_counts = self.N.ravel()[self.data_index]

    def training_error(self, L: np.ndarray) -> float:
        """The training error (710) of ``L`` from the data nodes found once (a record of every iteration asks)."""
        return metrics.training_error_at(L, self.data_index, self.data_counts)

    def at(self, phi: np.ndarray):
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class _Point:
    """A density energy at one field.  ``Kphi`` (K phi) and ``prior_terms`` (what :meth:`Prior.evaluate` returns
    at phi) are given by a caller that already has them (a step along a line), else computed when first needed."""

    energy: DensityEnergy
    phi: np.ndarray
    Kphi: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)
    prior_terms: tuple | None = dataclasses.field(default=None, compare=False, repr=False)

    @cached_property
    def _prior(self):
        if self.prior_terms is not None:
            return self.prior_terms
        Kphi = self.Kphi
        if Kphi is None:
            Kphi = self.energy.prior.K.apply(self.phi)
        return self.energy.prior.evaluate(self.phi, Kphi)

    @property
    def prior_energy(self) -> float:
        return self._prior[0]

    @property
    def mixing(self) -> np.ndarray:
        """Mixing coefficients a_j, eq. (718)."""
        return self._prior[2]

    @cached_property
    def prior_gradient(self) -> np.ndarray:
        """``lambda cell K (phi - t̄)`` with ``t̄ = sum_j a_j t_j`` (716)."""
        _, _, a, u = self._prior
        if len(a) == 1:
            return self.energy.prior.lam * u[0]
        return self.energy.prior.lam * np.tensordot(a, u, axes=1)

    def prior_hessp(self, v: np.ndarray) -> np.ndarray:
        """Hessian of the prior term: ``lambda cell K - beta lambda^2 sum_j a_j (u_j - ū)(u_j - ū)^T``."""
        pr = self.energy.prior
        out = pr.lam * pr.grid.cell * pr.K.apply(v)
        if pr.m > 1:
            _, _, a, u = self._prior
            du = u - np.tensordot(a, u, axes=1)[None]
            c = np.einsum("jab,ab->j", du, v)
            out = out - pr.beta * pr.lam ** 2 * np.tensordot(a * c, du, axes=1)
        return out


class _FixedParts:
    """The fixed parts of :meth:`SeparablePreconditioner._fixed_parts`; ``x_eig`` is computed on first access (the
    cheap form on a grid wider than :attr:`SeparablePreconditioner.dense_x_max` never needs it)."""

    def __init__(self, Ky: np.ndarray, sx: np.ndarray, x_matrix: np.ndarray):
        self.Ky, self.sx, self.x_matrix = Ky, sx, x_matrix
        self.ref = max(float(np.max(np.abs(np.diag(Ky)))), float(np.max(sx)))

    @cached_property
    def x_eig(self) -> tuple[np.ndarray, np.ndarray]:
        return np.linalg.eigh(self.x_matrix)


class SeparablePreconditioner:
    """Approximate inverse of the Newton matrix (160) ``J^T M J`` for field L, ``M = lambda cell K +
    diag(Lambda_X P hy)``, ``J = I - I_X P hy``, on the tangent space of the normalisation.

    ``M`` is replaced by a separable ``M0 = lambda cell K + diag(d)`` with a data term ``d(y)`` that does not
    depend on x: the x axis is then diagonalised by its FFT/DCT (or, up to :attr:`dense_x_max` nodes, by the dense
    eigenbasis of the x part), the y axis by one dense eigendecomposition of
    ``lambda cell lambda_y K_Y + diag(d)`` (ny x ny), so ``M0^{-1}`` costs two transforms and two
    (nx, ny) x (ny, ny) products.  Two strengths:

    * ``strong=False`` (cheap to build, one ``M0^{-1}`` per application): ``d`` is the x-average of
      ``max(Lambda_X, 0) P hy`` and the preconditioner is ``M0^{-1}`` itself.  Exact when the data term does not
      depend on x, apart from the per-x offsets it damps that the Hessian does not see.
    * ``strong=True``: ``d`` is a low quantile (:attr:`quantile`) of ``Lambda_X P hy`` over the x with
      ``Lambda_X > 0`` (where P is tiny, in the tails in y, the data term varies over x by orders of magnitude and
      the mean is set by the few x with the fattest tails, which over-damps the prior there), and the per-x
      normalisation is treated as the constraint it is: the step is taken in the gauge ``sum_y P hy d = 0`` (per-x
      constants do not move a normalised L) as the KKT solution ``d = M0^{-1}(r - V mu)``, ``V = P hy``, with
      ``mu`` from the nx x nx Schur complement ``S = V^T M0^{-1} V``.  With an exactly separable data term this
      is the exact pseudo-inverse of the Hessian on the tangent space (a test checks it).  Applied in one pass
      through the eigenbasis (:meth:`__call__`), it costs two (nx, ny) x (ny, ny) products and four x transforms
      per application (written as two ``M0^{-1}`` it took four: the whole Newton run at 128 x 128 l6 took 1.29 s
      that way against 1.05 s, side by side), and, to build, one nx x (nx ny) product and an nx x nx Cholesky
      factorisation.
      On the 128 x 128 l6 benchmark it needs about 20 times fewer CG iterations at the late Newton steps than
      the cheap form; on problems where the cheap form converges in a few iterations it only costs time, so
      :class:`bftcore.foundations.solvers.NewtonMatrix` starts cheap and switches for good once a CG solve needs more
      than 50 iterations.

    Used only to precondition conjugate gradients, never as the step itself.  ``cache`` (a dict owned by the
    caller, the Newton learning matrix of :mod:`bftcore.foundations.solvers` for one run) keeps the eigendecomposition
    of the x part between preconditioners.
    """

    #: The quantile over x of the strong form's data term.  Decision: 0.1, measured on the benchmark's l6 problems
    #: (``python -m bftcore bench``; ``scripts/preconditioner_candidates.py``): Newton at 128 x 128 took 897 CG
    #: iterations and 1.1 s against 1,665 and 2.1 s with the lower quartile, at 256 x 256 6,507 and 38 s against
    #: 10,028 and 56 s; 0.05 and 0.02 were as good at 128 x 128 and worse at 256 x 256.  An estimate of d(y) that
    #: is too large (most x have thinner tails than it) costs more CG iterations than one that is too small.
    quantile = 0.1
    #: Up to this many x nodes the x axis is transformed by its dense eigenbasis (two small matrix products) rather
    #: than by the FFT/DCT, whose call overhead dominates on small grids.  Measured for one application on an n x n
    #: grid, one BLAS thread: 3.5 against 20.5 us at n = 10, 8.7 against 26.7 at 32, 40 against 69 at 64, 117
    #: against 172 at 96, equal at 128, 2.3 against 1.8 ms at 256.
    dense_x_max = 96

    def __init__(self, point, strong: bool = True, cache: dict | None = None):
        E = point.energy
        grid, pr = E.grid, E.prior
        scale = pr.lam * grid.cell
        self.strong = strong
        d = self.data_term(point)
        self.d = d
        fixed = self._fixed_parts(E, scale, cache)
        Ky, sx = fixed.Ky, fixed.sx
        # the scale of the floor: with lambda_y = 0 and no data, Ky and d vanish and only the x part is left
        ref = max(float(np.max(d)), fixed.ref, 1e-300)
        A = Ky.copy()
        A.flat[::A.shape[0] + 1] += d + 1e-10 * ref
        w, self.Q = np.linalg.eigh(A)
        self.x_periodic = grid.x.boundary == "periodic" and grid.x.n > 1
        self.x_neumann = grid.x.boundary == "neumann" and grid.x.n > 1
        self.C = None  # the x part's dense eigenbasis, when it is used instead of the FFT/DCT
        if strong or grid.x.n <= self.dense_x_max:
            ex, C = fixed.x_eig
        if grid.x.n <= self.dense_x_max:
            self.C = C
            self.inv = 1.0 / np.maximum(ex[:, None] + w[None, :], 1e-12 * ref)
        else:
            self.inv = 1.0 / np.maximum(sx[:, None] + w[None, :], 1e-12 * ref)
        if not strong:
            return
        # Schur complement of the normalisation constraint, S[x, k] = V_x . (M0^{-1} e_k V_k)_x.  With the
        # eigenpairs (e_a, C[:, a]) of the x part, S = sum_a,j C[x,a] W[x,j] C[k,a] W[k,j] / (e_a + w_j), W = V Q:
        # one product Z Z^T, in chunks of a so that Z holds at most 2^21 numbers (16 MB)
        self.V = V = point.P * grid.hy
        nx, ny = V.shape
        self.W = W = V @ self.Q
        S = np.zeros((nx, nx))
        chunk = max(1, min(nx, (1 << 21) // (nx * ny)))
        for a0 in range(0, nx, chunk):
            a = slice(a0, min(nx, a0 + chunk))
            Z = np.multiply(C[:, a, None], W[:, None, :])
            Z *= 1.0 / np.sqrt(np.maximum(ex[a, None] + w[None, :], 1e-12 * ref))
            Z = Z.reshape(nx, -1)
            S += Z @ Z.T
        self.S = sla.cho_factor(S + 1e-13 * np.trace(S) / nx * np.eye(nx))

    @staticmethod
    def _fixed_parts(E, scale: float, cache: dict | None) -> _FixedParts:
        """What does not change during a run (the prior's parts, ``scale = lambda cell``): the dense y part ``Ky``
        (``scale lambda_y K_Y``), the x symbol ``sx``, ``ref`` the larger of Ky's largest diagonal entry and sx's
        largest value (the preconditioner's floor scales with it), and (built when
        first asked for) ``x_eig``, the eigenpairs of the x part ``scale lambda_x K_X``.  ``cache`` keeps them for
        the run, so a new preconditioner costs its data term and one ny x ny eigh (60 -> 40 us at 10 x 15)."""
        store = {} if cache is None else cache
        if scale not in store:
            store.clear()
            K = E.prior.K
            Ky = (scale * K.lambda_y) * K.ky.toarray()
            sx = scale * K.lambda_x * axis_symbol(E.grid.x, l0=K.l0, l2=K.l2, l4=K.l4, l6=K.l6)
            store[scale] = _FixedParts(Ky, sx, (scale * K.lambda_x) * K.kx.toarray())
        return store[scale]

    def data_term(self, point) -> np.ndarray:
        """The x-independent data term d(y) of ``M0`` (see the class docstring)."""
        lam = point.lagrange_multiplier
        if not self.strong:
            return np.mean(np.maximum(lam, 0.0)[:, None] * point.P, axis=0) * point.energy.grid.hy
        rows = lam > 0
        if not np.any(rows):
            return np.zeros(point.P.shape[1])
        return np.quantile(lam[rows, None] * point.P[rows], self.quantile, axis=0) * point.energy.grid.hy

    def still_good(self, point, rel: float = 0.25) -> bool:
        """Whether this preconditioner may be reused at ``point`` (its data term moved by less than ``rel``)."""
        d = self.data_term(point)
        return float(np.max(np.abs(d - self.d))) <= rel * float(np.max(np.abs(self.d)) + 1e-300)

    def _x_forward(self, r: np.ndarray) -> np.ndarray:
        """The x axis (the second last) into the x part's eigenbasis: dense, FFT, DCT or (one x node) as it is."""
        if self.C is not None:
            return self.C.T @ r
        if self.x_periodic:
            return sfft.fft(r, axis=-2)
        if self.x_neumann:
            return sfft.dct(r, type=2, axis=-2, norm="ortho")
        return r

    def _x_back(self, c: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`_x_forward` (real part: what it transforms back is real)."""
        if self.C is not None:
            return self.C @ c
        if self.x_periodic:
            return sfft.ifft(c, axis=-2).real
        if self.x_neumann:
            return sfft.idct(c, type=2, axis=-2, norm="ortho")
        return np.real(c)

    def solve_separable(self, r: np.ndarray) -> np.ndarray:
        """``M0^{-1} r`` (the last two axes of ``r`` are x and y; leading axes are a batch)."""
        return self._x_back(((self._x_forward(r) @ self.Q) * self.inv) @ self.Q.T)

    def __call__(self, r: np.ndarray) -> np.ndarray:
        """``M0^{-1}(r - V mu)``, ``mu = S^{-1} V^T M0^{-1} r`` (strong), in one pass through the eigenbasis:
        with ``c = T r`` (T the x transform and the product with Q), ``V^T M0^{-1} r`` is the per-x sum of
        ``W * X^T(inv c)`` (W = V Q, X^T the x transform back alone, no product with Q), and ``T(V mu)`` is the x
        transform of ``mu W``; so the application costs two (nx, ny) x (ny, ny) products, not four (the same
        operator: a test compares it with the two solves written out)."""
        if not self.strong:
            return self.solve_separable(r)
        c = self._x_forward(r) @ self.Q
        mu = sla.cho_solve(self.S, np.sum(self.W * self._x_back(c * self.inv), axis=-1))
        c -= self._x_forward(mu[..., None] * self.W)
        return self._x_back((c * self.inv) @ self.Q.T)


class LogPoint(_Point):
    """E_L evaluated at a conditionally normalised L."""

    @cached_property
    def P(self) -> np.ndarray:
        return np.exp(self.phi)

    @cached_property
    def value(self) -> float:
        """E_L = -(L, N)_data + prior, eqs. (109), (713)."""
        E = self.energy  # the data term over the data nodes only (N is zero elsewhere)
        return float(-np.dot(E.data_counts, self.phi.take(E.data_index)) + self.prior_energy)

    @cached_property
    def _r(self) -> np.ndarray:
        return -self.energy.N + self.prior_gradient

    @cached_property
    def lagrange_multiplier(self) -> np.ndarray:
        """Lambda_X(x) = N_X - lambda I_X K (L - t̄), eqs. (137), (717) (per x node)."""
        return -self._r.sum(axis=1)

    @cached_property
    def gradient(self) -> np.ndarray:
        """g-gradient ``(I - P hy I_X) (-N + lambda K (L - t̄))``: minus the residual of (141)/(716)."""
        return self._r + self._V * self.lagrange_multiplier[:, None]

    @cached_property
    def _V(self) -> np.ndarray:
        """``P hy``: the normalisation's weights per x, kept with the point, as the Hessian action needs them (and
        ``Lambda_X P hy``, :attr:`_lamV`) at every CG iteration (the same numbers, computed once)."""
        return self.P * self.energy.grid.hy

    @cached_property
    def _lamV(self) -> np.ndarray:
        return self.lagrange_multiplier[:, None] * self._V

    def hessp(self, v: np.ndarray, convexified: bool = False) -> np.ndarray:
        """Normalisation-consistent Hessian action ``J^T M J v`` of eq. (160), ``J = I - I_X P hy``,
        ``M = lambda cell K (+ mixture term) + diag(Lambda_X P hy)``.

        ``convexified=True`` gives the Gauss-Newton form: Lambda_X clipped at 0 and the (negative) mixture term
        dropped, which is positive definite on the tangent space of the normalisation; the Newton solver uses it
        for a step where the true Hessian has negative curvature."""
        V = self._V
        Jv = v - np.sum(V * v, axis=1, keepdims=True)
        if convexified:
            pr = self.energy.prior
            lamX = np.maximum(self.lagrange_multiplier, 0.0)
            MJv = pr.lam * pr.grid.cell * pr.K.apply(Jv) + lamX[:, None] * V * Jv
        else:
            MJv = self.prior_hessp(Jv) + self._lamV * Jv
        return MJv - V * MJv.sum(axis=1, keepdims=True)

    @cached_property
    def residual(self) -> float:
        """Stationarity residual: max |N - lambda K(L - t̄) - Lambda_X P hy| (eqs. (127)/(716))."""
        return float(abs(self.gradient).max())


class LogDensityEnergy(DensityEnergy):
    """Gaussian (mixture) prior on L = ln P with normalisation per x, eqs. (108)-(141), (713)-(718).

    Newton on E_L: a loose CG tolerance (0.1) until the gradient has fallen ten orders of magnitude, the
    :class:`SeparablePreconditioner`, and saddles left along negative curvature (the mixture prior and a negative
    Lambda_X make the Hessian (160) indefinite)."""

    field = "L"
    newton_loose_until = 1e-10
    saddle_escape = True

    def newton_preconditioner(self, point, previous=None, strong: bool = False, cache: dict | None = None):
        """The preconditioner of the Newton system at ``point``: ``previous`` while it is still good there
        (:meth:`SeparablePreconditioner.still_good`), else a new one of the given strength."""
        if previous is not None and previous.still_good(point):
            return previous
        return SeparablePreconditioner(point, strong, cache)

    def newton_direct(self) -> BandedRun | None:
        """The exact Newton steps of one run (:class:`bftcore.models.banded_newton.BandedRun`: a banded Cholesky
        per step, single Gaussian priors on the smallest grids, and a chord step after a small step), or None where
        CG is cheaper or it does not apply.  Only this class: the band is the Hessian (160) of the Gaussian prior
        ``prior``, and the subclasses (a prior potential, local priors) replace that prior's part of the Hessian."""
        banded = BandedNewton.for_energy(self) if type(self) is LogDensityEnergy else None
        return None if banded is None else banded.run()

    def at(self, L: np.ndarray) -> LogPoint:
        return LogPoint(self, np.asarray(L, dtype=float))

    def normalise(self, L: np.ndarray) -> np.ndarray:
        return normalise_log(L, self.grid.hy)

    def to_L(self, phi):
        return phi

    def to_P(self, phi):
        return np.exp(phi)


class ProbPoint(_Point):
    """E_P evaluated at a feasible P (P >= 0, normalised per x, P > 0 at the data)."""

    @property
    def P(self) -> np.ndarray:
        return self.phi

    @cached_property
    def value(self) -> float:
        """E_P = -(ln P, N)_data + prior, eq. (163)."""
        E = self.energy
        Pd = self.phi.take(E.data_index)
        if Pd.size and Pd.min() <= 0:
            return np.inf
        return float(-np.dot(E.data_counts, np.log(Pd)) + self.prior_energy)

    @cached_property
    def raw_gradient(self) -> np.ndarray:
        """Gradient of E_P without the constraint: ``-N/P + lambda K (P - t̄)``."""
        E = self.energy
        g = self.prior_gradient.copy()
        g.ravel()[E.data_index] -= E.data_counts / self.phi.take(E.data_index)
        return g

    @cached_property
    def lagrange_multiplier(self) -> np.ndarray:
        """Lambda_X = N_X - I_X P K P per x (eq. (167), with the template), in units of 1/hy."""
        return -np.sum(self.phi * self.raw_gradient, axis=1)

    @cached_property
    def gradient(self) -> np.ndarray:
        """Reduced gradient ``-N/P + lambda K (P - t̄) + Lambda_X hy``; zero on the free set at the minimum and
        >= 0 where P = 0 (the KKT conditions of (165) with P >= 0)."""
        return self.raw_gradient + self.lagrange_multiplier[:, None] * self.energy.grid.hy

    def hessp(self, v: np.ndarray) -> np.ndarray:
        """Hessian of E_P at fixed Lambda: ``N/P^2 + lambda K`` (+ mixture term), eq. (181)."""
        out = self.prior_hessp(v)
        mask = self.energy.data_mask
        out[mask] += self.energy.N[mask] / self.phi[mask] ** 2 * v[mask]
        return out

    @cached_property
    def _projected_step(self) -> np.ndarray:
        """``Proj(P - G)``, for the KKT residual."""
        return project_simplex(self.phi - self.gradient, self.energy.grid.hy)

    @cached_property
    def residual(self) -> float:
        """KKT residual ``max |P - Proj(P - G)|``: zero exactly when the reduced gradient vanishes where P > 0 and
        is >= 0 where P = 0 (stationarity (165)/(167) with the bound P >= 0)."""
        return float(np.max(np.abs(self.phi - self._projected_step)))


class ProbabilityEnergy(DensityEnergy):
    """Gaussian (mixture) prior on P with normalisation and P >= 0, eqs. (163)-(170)."""

    field = "P"
    minimiser_step = ActiveSetStep

    def at(self, P: np.ndarray, Kphi: np.ndarray | None = None, prior_terms: tuple | None = None) -> ProbPoint:
        """E_P at P; ``Kphi`` and ``prior_terms``, when the caller knows them, spare their computation."""
        return ProbPoint(self, np.asarray(P, dtype=float), Kphi, prior_terms)

    def normalise(self, P: np.ndarray) -> np.ndarray:
        return project_simplex(P, self.grid.hy)

    def to_L(self, phi):
        with np.errstate(divide="ignore"):
            return np.log(phi)

    def to_P(self, phi):
        return phi



@dataclass
class DensityProblem:
    """Everything built from a density configuration."""

    config: dict
    grid: Grid
    N: np.ndarray
    K: PriorOperator
    energy: LogDensityEnergy | ProbabilityEnergy
    P_true: np.ndarray | None


def build_density(config: dict) -> DensityProblem:
    """Grid, data counts, prior operator, energy and truth of a density configuration (checked by the gate
    unless it is a :class:`bftcore.foundations.config.Valid` document already)."""
    cfg = checked(config)
    grid = grid_from_config(cfg)
    pr = cfg["prior"]
    K = PriorOperator(grid, pr["lambda_x"], pr["lambda_y"], pr["l0"], pr["l2"], pr["l4"], pr["l6"])
    templates = [template_field(t, grid, pr["field"]) for t in cfg["templates"]]
    prior = Prior(K, pr["lambda"], templates or None, cfg["weights"] or None, cfg["beta"])
    N = grid.counts(cfg["data"])
    energy = (LogDensityEnergy if pr["field"] == "L" else ProbabilityEnergy)(grid, N, prior)
    P_true = paper_true_density(grid) if cfg["truth"] == "paper" else None
    return DensityProblem(cfg, grid, N, K, energy, P_true)


def empirical_density(N: np.ndarray, grid: Grid) -> np.ndarray:
    """Extended conditional empirical density P~_emp (237): N/n_x at x with data, uniform elsewhere."""
    nx = N.sum(axis=1, keepdims=True)
    uniform = np.full_like(N, 1.0 / (grid.y.n * grid.hy))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(nx > 0, N / (np.maximum(nx, 1) * grid.hy), uniform)


def kernel_density(problem: DensityProblem, mass2: float) -> np.ndarray:
    """Kernel start ``C~ P~_emp`` with ``C = (K + m_C^2 I)^{-1}`` (676), (698): smooth, then normalise each x.

    For higher-order priors C can have negative entries; the smoothed density is floored at 1e-12 of its row
    maximum so that ln P exists."""
    grid = problem.grid
    P = problem.K.solve(empirical_density(problem.N, grid), 1.0, mass2)
    P = np.maximum(P, 1e-12 * np.max(P, axis=1, keepdims=True))
    return P / (P.sum(axis=1, keepdims=True) * grid.hy)


def initial_field(problem: DensityProblem, init=None) -> np.ndarray:
    """The start of the iteration (Sect. 7.3): uniform, kernel, empirical ln(N/n + eps), a template, or an array
    (warm start from a previous solution)."""
    cfg, grid, E = problem.config, problem.grid, problem.energy
    fld = cfg["prior"]["field"]
    if init is not None and not isinstance(init, str):
        phi = np.asarray(init, dtype=float)
        if phi.shape != grid.shape:
            raise ValueError(f"warm-start field has shape {phi.shape}, the grid is {grid.shape}")
        if fld == "P":
            phi = project_simplex(phi, grid.hy)
            if np.any(phi[problem.N > 0] <= 0):  # a new data point where P = 0: blend in a little uniform density
                phi = 0.999 * phi + 0.001 / (grid.y.n * grid.hy)
            return phi
        if not np.all(np.isfinite(phi)):
            raise ValueError("warm-start field L contains NaN or infinite values")
        return normalise_log(phi, grid.hy)
    init = cfg["solver"]["init"] if init is None else init
    if init == "coarse":
        return coarse_start(problem)
    if init == "uniform":
        P = np.full(grid.shape, 1.0 / (grid.y.n * grid.hy))
    elif init == "kernel":
        P = kernel_density(problem, cfg["solver"]["init_mass2"])
    elif init == "empirical":
        if fld == "L":
            n = max(problem.N.sum(), 1.0)
            return normalise_log(np.log(problem.N / n + EMPIRICAL_EPS), grid.hy)
        P = empirical_density(problem.N, grid)
    elif init.startswith("template:"):
        t = E.prior.templates[int(init.split(":")[1])]
        if fld == "L":
            return normalise_log(t, grid.hy)
        P = project_simplex(t, grid.hy)
        if np.any(P[problem.N > 0] <= 0):  # E_P is infinite where a datum has P = 0: as for a warm start
            P = 0.999 * P + 0.001 / (grid.y.n * grid.hy)
        return P
    else:
        raise ConfigError(f"unknown init {init!r}")
    return normalise_log(np.log(P), grid.hy) if fld == "L" else P


#: ``solver.init: "coarse"`` (:func:`coarse_start`) coarsens every axis of at least this many nodes ...
COARSE_MIN_NODES = 64
#: ... to this fraction of its nodes (rounded up): 128 -> 32, 256 -> 64.  Decision, measured
#: (docs/performance.md, "The multilevel start as an option"): from a half the fine solve took as many steps or a few
#: fewer, but the half's coarse solve cost more than it saved (grid family 128^2 l6: 0.67 s in all against 0.62).
COARSE_FACTOR = 4


def coarse_shape(shape: tuple[int, int]) -> tuple[int, int]:
    """The grid of :func:`coarse_start` for a grid of ``shape``: each axis of at least :data:`COARSE_MIN_NODES`
    nodes divided by :data:`COARSE_FACTOR` (rounded up), the others as they are."""
    return tuple(-(-n // COARSE_FACTOR) if n >= COARSE_MIN_NODES else n for n in shape)  # type: ignore[return-value]


def coarse_start(problem: DensityProblem) -> np.ndarray:
    """The multilevel start (``solver.init: "coarse"``): the same document (domain, data, prior, templates and
    solver) solved on the coarser grid of :func:`coarse_shape`, from its own coarse start (so 1024 -> 256 -> 64 ->
    16 nodes, the last from the kernel start), its field carried onto this grid by cubic splines
    (:func:`bftcore.foundations.grid.prolong`) and normalised as a warm start is.  On a grid that is not coarsened
    (fewer than :data:`COARSE_MIN_NODES` nodes along every axis) it is the kernel start.

    Why: a fine grid's Newton steps are as many as its problem is nonlinear; started from the coarse answer, most
    of them are taken on a grid a sixteenth the size.  Measured (docs/performance.md): with l6, the same minimum in
    a third to a half less time from 64 x 64 to 256 x 256 on the benchmark's problems, but slower on the grid
    family's 256 x 256 and on some l2 problems.  Not the default: a problem with several local minima may end in
    another one than from the kernel start (single-level coarse starts did on the benchmark's 256 x 256 l6).  A
    coarse solve that the gate refuses on the coarse grid, or that ends in a field that is not finite, gives way to
    the kernel start."""
    grid = problem.grid
    shape = coarse_shape(grid.shape)
    if shape == grid.shape:
        return initial_field(problem, "kernel")
    doc = dict(copy_document(problem.config))  # a plain dict: the coarse document passes the gate again
    doc["grid"]["x"]["n"], doc["grid"]["y"]["n"] = shape
    doc["truth"] = None  # the coarse run's records need no test error
    doc.pop("choose", None)
    try:
        coarse = build_density(doc)
    except ConfigError:  # the coarse grid cannot carry the document (a prior too stiff for it): start as usual
        return initial_field(problem, "kernel")
    history, _ = run_to_end(records(coarse))
    field = history[-1].field
    if not np.all(np.isfinite(field)):
        return initial_field(problem, "kernel")
    return initial_field(problem, prolong(field, grid.shape, (grid.x.boundary, grid.y.boundary)))


def prior_samples(problem: DensityProblem, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` fields drawn from the prior the configuration defines, as densities ``(n, nx, ny)``, and the
    template index of each: component j with probability p_j, then ``t_j + (lambda cell K)^{-1/2} z``
    (:meth:`bftcore.foundations.operators.PriorOperator.sample`), normalised per x (field L: ``exp`` of the normalised
    log; field P: projected onto the densities).  What the sliders mean, drawn: a stiffer prior gives smoother fields.

    The components are exact.  For beta != 1 the mixture prior ``(sum_j p_j exp(-beta lambda E_0j))^(1/beta)``
    is not a mixture of Gaussians; the samples take the components with the weights p_j, its beta = 1 form."""
    E = problem.energy
    pr, grid = E.prior, problem.grid
    n = check_samples(n, grid.size, "prior samples")
    comps = rng.choice(pr.m, size=n, p=pr.weights)
    fields = pr.templates[comps] + problem.K.sample(rng, n, pr.lam * grid.cell)
    if problem.config["prior"]["field"] == "L":
        return np.stack([np.exp(normalise_log(f, grid.hy)) for f in fields]), comps
    return np.stack([project_simplex(f, grid.hy) for f in fields]), comps


def records(problem: DensityProblem, init=None):
    """Yield a :class:`~bftcore.foundations.records.Record` (with ``L`` and ``P``) per iteration of the configured
    solver."""
    cfg, grid, E = problem.config, problem.grid, problem.energy
    so = cfg["solver"]
    phi0 = initial_field(problem, init)
    for rec in solver_iterate(E, phi0, method=so["method"], mass2=so["mass2"], min_iter=so["min_iter"],
                        max_iter=so["max_iter"], tol=so["tol"]):
        P = E.to_P(rec.field)
        L = E.to_L(rec.field)
        te = metrics.test_error(L, problem.P_true, grid) if problem.P_true is not None else None
        yield Record(iteration=rec.iteration, energy=rec.energy, train_error=E.training_error(L),
                     test_error=te, mixing=rec.mixing, step=rec.step, residual=rec.residual, method=rec.method,
                     change=rec.change, converged=rec.converged, elapsed_s=rec.elapsed_s, L=L, P=P, field=rec.field)


def is_local_minimum(problem: DensityProblem, phi: np.ndarray, rtol: float = 1e-8) -> bool:
    """Stability of a density solution: the smallest eigenvalue of the normalisation-consistent Hessian (160)
    (Lanczos on Hessian actions, the nx per-x zero modes projected out) is not negative.  For field P the free
    face is checked the same way with the Hessian (181) restricted to P > 0 and the per-x sums held fixed."""
    pt = problem.energy.at(phi)
    shape, n = problem.grid.shape, problem.grid.size
    if problem.config["prior"]["field"] == "L":
        mask = np.ones(shape, bool)
    else:
        mask = phi > 0

    def project(v):  # tangent of the per-x normalisation on the free nodes (Euclidean)
        v = np.where(mask, v.reshape(shape), 0.0)
        cnt = np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return np.where(mask, v - v.sum(axis=1, keepdims=True) / cnt, 0.0)

    def mv(v):
        return project(pt.hessp(project(v))).ravel()

    free = mask.sum(axis=1)
    if int(np.sum(np.maximum(free - 1, 0))) == 0:  # no direction keeps the normalisation: nothing to descend along
        return True
    return lowest_tangent_eigenvalue(mv, n, rtol, v0=project(np.random.default_rng(1).standard_normal(n)).ravel())


def lowest_tangent_eigenvalue(mv, n: int, rtol: float = 1e-8, v0=None) -> bool:
    """Whether the symmetric operator ``mv`` (a projected Hessian action on flat vectors of length n) has no
    eigenvalue below ``-max(rtol, 1e-6)`` times its scale: exactly, column by column, up to 400 unknowns (ARPACK
    needs a few dimensions), else by Lanczos for the smallest eigenvalue."""
    scale = max(1.0, float(np.max(np.abs(mv(np.random.default_rng(0).standard_normal(n))))))
    if n <= 400:
        H = np.column_stack([mv(e) for e in np.eye(n)])
        lam_min = float(np.min(np.linalg.eigvalsh(0.5 * (H + H.T))))
    else:
        op = spl.LinearOperator((n, n), matvec=mv, dtype=float)
        v0 = mv(np.random.default_rng(1).standard_normal(n)) if v0 is None else v0
        try:
            lam_min = spl.eigsh(op, k=1, which="SA", tol=1e-6, maxiter=20 * n, v0=v0,
                                return_eigenvectors=False)[0]
        except spl.ArpackNoConvergence as e:
            lam_min = min(e.eigenvalues) if len(e.eigenvalues) else 0.0
    return bool(lam_min >= -max(rtol, 1e-6) * scale)


def solve(problem: DensityProblem, init=None, callback=None, check_stability: bool = False) -> "DensityFit":
    """Run the configured solver to the end (or until ``callback(record)`` returns True) and return the result as
    arrays; ``check_stability=True`` also decides whether the solution is a local minimum
    (:func:`is_local_minimum`)."""
    history, elapsed = run_to_end(records(problem, init), callback)
    stable = is_local_minimum(problem, history[-1].field) if check_stability else None
    return DensityFit(history, elapsed, problem, stable)


def run_to_end(stream, callback=None) -> tuple[list, float]:
    """The records of ``stream`` until it ends or ``callback(record)`` returns True, and the wall time taken."""
    t0 = time.perf_counter()
    history = []
    for rec in stream:
        history.append(rec)
        if callback is not None and callback(rec):
            break
    return history, time.perf_counter() - t0


@dataclass
class DensityFit(FitResult):
    """A density fit as arrays: the records (the last with ``L`` and ``P``), the problem, and (when checked) its
    stability."""

    problem: DensityProblem
    stable: bool | None = None

    @property
    def L(self) -> np.ndarray:
        assert self.last.L is not None
        return self.last.L

    @property
    def P(self) -> np.ndarray:
        assert self.last.P is not None
        return self.last.P

    def summary(self) -> dict:
        last = self.last
        out = {"energy": float(last.energy), "mixing": [float(a) for a in last.mixing],
               "test_error": finite_or_none(last.test_error), "converged": bool(last.converged)}
        if self.stable is not None:
            out["stable"] = bool(self.stable)
        return out

    def to_document(self) -> dict:
        """The result document of CONVENTIONS.md §4 (``"stable"`` only when the stability was checked)."""
        problem, grid, last, L, P = self.problem, self.problem.grid, self.last, self.L, self.P
        point = problem.energy.at(self.field)
        h, sd = metrics.regression_function(P, grid)
        notes = []
        if last.test_error is not None and not np.isfinite(last.test_error):
            notes.append("test_error is infinite: P = 0 at nodes where the true density is positive")
        doc = {
            "model": "density",
            "field": problem.config["prior"]["field"],
            "energy": float(last.energy),
            "train_error": finite_or_none(last.train_error),
            "test_error": finite_or_none(last.test_error),
            "kl_to_truth": (finite_or_none(metrics.kl_to_truth(L, problem.P_true, grid))
                            if problem.P_true is not None else None),
            "iterations": int(last.iteration),
            "converged": bool(last.converged),
            "residual": float(last.residual),
            "normalisation_error": metrics.normalisation_error(P, grid),
            "max_P": float(np.max(P)),
            "mixing": [float(a) for a in last.mixing],
            "lagrange_multiplier": point.lagrange_multiplier.tolist(),
            "regression": {"h": h.tolist(), "sd": sd.tolist()},
            "P": finite_list(P),
            "L": finite_list(L),
            "history": [r.summary() for r in self.history],
            "elapsed_s": float(self.elapsed_s),
        }
        if notes:
            doc["notes"] = notes
        if self.stable is not None:
            doc["stable"] = bool(self.stable)
        return doc


class DensityKind:
    """The conditional density p(y|x) as a problem kind (:class:`bftcore.foundations.config.ProblemKind`): every
    document of model "density" that no more specific kind claims.  Its evidence path and posterior band are the
    Laplace evidence's (:mod:`bftcore.models.evidence`, a module above this one): :mod:`bftcore.models.problems`
    adds them and registers the kind."""

    name: str = "density"
    model: str = "density"
    claims: dict[str, object] = {}
    has_exact: bool = False
    y_on_grid: bool = True
    default_templates: tuple[str, ...] = ()
    result_type: type[FitResult] = DensityFit
    drawn_as: str = "heatmap"

    def nodes(self, cfg: dict) -> int:
        return cfg["grid"]["x"]["n"] * cfg["grid"]["y"]["n"]

    def is_sparse_heavy(self, cfg: dict) -> bool:
        return cfg["prior"]["field"] == "P"

    def iterate(self, cfg: dict, init=None) -> Iterator[Record]:
        yield from records(build_density(cfg), init)

    def solve(self, cfg: dict, init=None, callback=None, check_stability: bool = False) -> FitResult:
        return solve(build_density(cfg), init, callback, check_stability)

    def exact(self, cfg: dict) -> dict | None:
        return None
