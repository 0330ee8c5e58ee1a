"""Learning algorithms of Sect. 7.2 with a line search on eta, and the observable iteration (NIFTy's shape).

An iteration is ``phi <- normalise(phi + eta d)`` with the direction ``d = -A^{-1} G`` of eq. (611)/(612) for a
learning matrix A.  The parts, each a class:

* the learning matrices, one class each, computing the direction at a point:
  :class:`GradientMatrix` A = I (621); :class:`MassiveMatrix` massive relaxation A = K + m^2 I (632), solved
  exactly by the energy's ``massive_solve`` (FFT/DCT for a density, a sparse factorisation for regression);
  :class:`NewtonMatrix` A = -H, the normalisation-consistent Hessian (160) of E_L or the Hessian of regression,
  solved by preconditioned conjugate gradients with exact Hessian actions (:func:`newton_cg_direction`) and the
  energy's ``newton_preconditioner``, or exactly by the energy's own direct solve where it offers one
  (``newton_direct``: E_L's banded Cholesky on the smallest grids).  When the Hessian is not positive definite along
  a CG direction the CG is truncated there (Steihaug), so the step is still a descent direction; if that happens on
  the very first CG direction the step is the preconditioned gradient step (a massive-relaxation step) and the
  record's ``method`` says ``"newton-fallback"``;
* the step of an iteration: :class:`DescentStep` (a learning matrix, then :func:`line_search`) for unconstrained
  fields (L, regression's h); for field P with ``P >= 0`` the active-set method,
  :class:`bftcore.models.active_set.ActiveSetStep` (the same three learning matrices on the face ``P > 0``, the Hessian
  being that of E_P, (181)).  The energy names the step it needs (``energy.minimiser_step``; None is the
  descent step).  A step is created per run and owns what it reuses (preconditioner, factorisations, the last
  step length);
* the stopping rule: :class:`IterationController`;
* :func:`iterate`, the minimiser: a generator yielding one :class:`bftcore.foundations.records.Record` per iteration
  (iteration 0 is the start; the record's ``field`` is the solver's field, L, P or h); closing it stops the run
  between iterations, and any field can be passed back in as a warm start.

Every method uses a line search on eta that only accepts a decrease of the energy, so the energy never increases.

Energies: any object with ``at(phi)`` returning a point with ``value``, ``gradient``, ``hessp(v)``, ``mixing``
and ``residual``, plus ``normalise(phi)``, ``minimiser_step``, ``massive_solve(r, mass2)``,
``newton_preconditioner(point, previous, strong, cache)``, ``newton_loose_until`` (Newton's CG tolerance is 0.1
while ``|G| > newton_loose_until |G0|``) and ``saddle_escape`` (Newton retries with the point's
``hessp(v, convexified=True)`` where CG meets negative curvature, and follows that curvature); optionally
``newton_direct()``, called once per run: None, or a function of a point returning the exact Newton step there (or
None where it declines, e.g. where the Hessian is not positive definite: the step is then CG's).
"""
from __future__ import annotations

import math
import time

import numpy as np

from .limits import check_deadline
from .records import Record

#: The learning algorithms by their names in the JSON document (``solver.method``); the gate takes this list.
METHODS = ("newton", "massive", "gradient")


class SolverError(RuntimeError):
    """The iteration produced a non-finite energy or field."""


# ----------------------------------------------------------------------------------------------- line search
def line_search(energy, phi, d, E0, slope, eta0=1.0, exact=False, max_halvings=60, path=None, line=None,
                accept_first=False):
    """Step length eta along d with ``E(normalise(phi + eta d)) < E0``; returns ``(eta, new_phi, new_point)``.

    ``path(eta)`` replaces ``normalise(phi + eta d)`` when given (the projection arc of the active-set method).
    ``line``, when given (a :class:`bftcore.models.active_set.LineEnergy`), returns the energy on the path in closed
    form (or None where it cannot), so that only the accepted step is built as a full point (``line.point``); the step
    lengths tried are the same either way.

    ``exact=False`` (Newton): try eta0, then backtrack with safeguarded quadratic interpolation (Armijo, c = 1e-4).
    ``exact=True`` (gradient and massive relaxation, standing in for the paper's FindMinimum): from eta0 (the last
    accepted step) one step of the quadratic model through E(0), the slope at 0 and E(eta0), or backtracking
    when eta0 does not decrease the energy; two or three energy evaluations per iteration.  ``eta = 0`` (no point)
    when no decrease can be found, which the caller treats as convergence at machine precision.  ``accept_first=True``
    takes eta0 as it is whenever it decreases the energy (eta0 is then a Barzilai-Borwein step, see
    :func:`bftcore.models.active_set.barzilai_borwein`).
    """
    def trial(eta):
        if line is not None:
            v = line(eta)
            if v is not None:
                return (v if np.isfinite(v) else np.inf), None, None  # the point is built once accepted
        p = path(eta) if path is not None else energy.normalise(phi + eta * d)
        pt = energy.at(p)
        v = pt.value
        return (v if np.isfinite(v) else np.inf), p, pt

    if line is not None:
        eta, p, pt = _line_search_core(trial, E0, slope, eta0, exact, max_halvings, phi, accept_first)
        if pt is None and eta > 0:  # accepted on the closed form: build the point and check it for real
            q, pt = line.accept(eta, path if path is not None else (lambda e: energy.normalise(phi + e * d)))
            if not pt.value < E0:  # rounding at the last digits: decide with full evaluations instead
                return line_search(energy, phi, d, E0, slope, eta0, exact, max_halvings, path, None, accept_first)
            return eta, q, pt
        return eta, p, pt
    return _line_search_core(trial, E0, slope, eta0, exact, max_halvings, phi, accept_first)


def _line_search_core(trial, E0, slope, eta0, exact, max_halvings, phi, accept_first=False):
    """The step-length rules of :func:`line_search` on a ``trial(eta) -> (E, phi, point)`` function."""
    eta = eta0
    E1, p1, pt1 = trial(eta)
    if accept_first and E1 < E0:
        return eta, p1, pt1
    if not exact:
        for _ in range(max_halvings):
            if E1 <= E0 + 1e-4 * eta * slope and E1 < E0:
                return eta, p1, pt1
            if E1 < E0 and eta < 1e-6:
                return eta, p1, pt1
            denom = 2 * (E1 - E0 - slope * eta)
            new = -slope * eta * eta / denom if np.isfinite(E1) and denom > 0 else 0.5 * eta
            eta = min(max(new, 0.1 * eta), 0.5 * eta)
            E1, p1, pt1 = trial(eta)
        return (eta, p1, pt1) if E1 < E0 else (0.0, phi, None)

    if E1 < E0:
        # one quadratic-model step from E0, the slope at 0 and E(eta0); keep the better of the two points
        denom = 2 * (E1 - E0 - slope * eta)
        eta_q = -slope * eta * eta / denom if denom > 0 else 4 * eta
        eta_q = min(max(eta_q, 0.25 * eta), 8 * eta)
        if abs(eta_q - eta) > 0.05 * eta:
            Eq, pq, ptq = trial(eta_q)
            if Eq < E1:
                return eta_q, pq, ptq
        return eta, p1, pt1
    for _ in range(max_halvings):  # backtrack with safeguarded quadratic interpolation
        denom = 2 * (E1 - E0 - slope * eta)
        new = -slope * eta * eta / denom if np.isfinite(E1) and denom > 0 else 0.5 * eta
        eta = min(max(new, 0.1 * eta), 0.5 * eta)
        E1, p1, pt1 = trial(eta)
        if E1 < E0:
            return eta, p1, pt1
    return 0.0, phi, None



# ------------------------------------------------------------------------------------------------- Newton CG
def newton_cg_direction(point, precond, rtol: float, maxiter: int, curvature: list | None = None,
                        convexified: bool = False):
    """Solve ``H d = -G`` by preconditioned CG.

    If CG meets a direction of non-positive curvature (the Hessian is not positive definite there) and
    ``convexified`` says the point offers a convexified Hessian (``hessp(v, convexified=True)``, Gauss-Newton,
    E_L), the system is solved again
    with it: a descent step of full length instead of a truncated one, labelled ``"newton-convexified"``; the
    direction of negative curvature CG found is appended to ``curvature`` (when a list is given) so that the
    caller can follow it too (a saddle is left along it, which the convexified step alone does only slowly).
    Otherwise CG is truncated there (Steihaug); if that happens on the very first direction the preconditioned
    gradient step is returned, labelled ``"newton-fallback"``.  Returns ``(d, label, cg_iterations)``.
    """
    d, label, k, p = _pcg(point.gradient, point.hessp, precond, rtol, maxiter)
    if label == "negative-curvature":
        if curvature is not None and p is not None:
            curvature.append(p)
        if convexified:
            def hessp(v):
                return point.hessp(v, convexified=True)
            d2, label2, k2, _ = _pcg(point.gradient, hessp, precond, rtol, maxiter)
            if label2 != "negative-curvature":
                return d2, "newton-convexified", k + k2
        if k == 0:
            return d, "newton-fallback", k
        return d, "newton", k
    return d, label, k


def _pcg(g, hessp, precond, rtol, maxiter):
    """Preconditioned CG for ``H x = -g``; stops at non-positive curvature with label "negative-curvature", the
    iterate so far (the preconditioned gradient if it is the first direction) and that direction (strictly
    negative curvature only, else None); stops as solved ("newton") when the preconditioned residual vanishes
    (``r.z == 0``, the breakdown of the recurrence).  Returns ``(x, label, iterations, direction)``."""
    r = -g
    z = precond(r)
    p = z.copy()
    rz = float(np.vdot(r, z))
    x = np.zeros_like(g)
    gnorm = float(np.linalg.norm(g))
    for k in range(maxiter):
        Hp = hessp(p)
        pHp = float(np.vdot(p, Hp))
        if not pHp > 1e-14 * float(np.vdot(p, p)) * max(1.0, abs(rz)):
            neg = p if pHp < 0 else None
            return (z if k == 0 else x), "negative-curvature", k, neg
        alpha = rz / pHp
        x += alpha * p
        r -= alpha * Hp
        if np.linalg.norm(r) <= rtol * gnorm:
            return x, "newton", k + 1, None
        z = precond(r)
        rz_new = float(np.vdot(r, z))
        if rz_new == 0.0:
            # What is left of the residual is invisible to the (positive semidefinite) preconditioner: in exact
            # arithmetic z = 0 there (for E_L the per-x constants, which do not move a normalised L), in rounding
            # r.z = 0 with z != 0, and the next update would divide by zero. CG has nothing to add: x is the step.
            # Decision: exactly 0 only.  A negative r.z (rounding, or the strong preconditioner's Schur correction)
            # goes on as CG always did: stopping there too (82be347) cut the grid family's 256 x 256 l6 steps short,
            # 39 -> 154 Newton steps and a higher local minimum (E 444.9441 against 444.9427).
            return x, "newton", k + 1, None
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, "newton", maxiter, None


def _curvature_step(energy, phi, point, p, scale):
    """Follow a direction of negative curvature ``p`` from ``point``: sign chosen downhill, length first ``scale``
    (the size of the step just taken), doubled while the energy keeps falling (up to 8 times), halved when it
    does not fall (up to 8 times).  Returns ``(phi, point)``, unchanged when no decrease is found."""
    G = point.gradient
    p = p - np.mean(p, axis=-1, keepdims=True)  # per-x constants do not move a normalised L
    size = float(np.max(np.abs(p)))
    if not size > 0:
        return phi, point
    p = p * (scale / size)
    if np.vdot(G, p) > 0:
        p = -p
    best_phi, best_pt, E_best = phi, point, point.value
    eta = 1.0
    for _ in range(8):
        q = energy.normalise(phi + eta * p)
        pt = energy.at(q)
        if pt.value < E_best:
            best_phi, best_pt, E_best = q, pt, pt.value
            eta *= 2.0
        elif best_pt is point:
            eta *= 0.5
        else:
            break
    return best_phi, best_pt


# ------------------------------------------------------------------------------------------ learning matrices
class GradientMatrix:
    """A = I (621): the direction is ``-G``."""

    name = "gradient"

    def __init__(self, energy, mass2: float, cg_maxiter: int):
        self.energy = energy

    def direction(self, point):
        """``(d, label, curvature)``: the direction, the record's method label, directions of negative curvature."""
        return -point.gradient, self.name, ()


class MassiveMatrix:
    """Massive relaxation A = K + m^2 I (632): the direction is ``-(K + m^2 I)^{-1} G``, solved exactly by the
    energy (``massive_solve``)."""

    name = "massive"

    def __init__(self, energy, mass2: float, cg_maxiter: int):
        self.energy, self.mass2 = energy, mass2

    def direction(self, point):
        return -self.energy.massive_solve(point.gradient, self.mass2), self.name, ()


class NewtonMatrix:
    """Newton, A = -H ((160) for E_L): ``H d = -G`` solved by preconditioned CG (:func:`newton_cg_direction`).

    The CG is solved inexactly, to a relative residual of ``sqrt(|G|/|G0|)`` (the forcing term: 1 at the first step,
    where regression's preconditioner, the exact inverse of its single-component Hessian, makes one CG iteration the
    Newton step); for E_L (``energy.newton_loose_until = 1e-10``) it is 0.1 until the gradient has fallen ten orders
    of magnitude below its start, and ``sqrt(|G|/|G0|)`` only then, for a superlinear finish. Far from the minimum
    the quadratic model is poor (where L falls to -100 in the tails of P, each Newton step moves it by tens), so an
    exact solve buys little.  Measured on the benchmark problems (one BLAS thread, CPU time, same final energies):
    128 x 128 l6, the ``sqrt`` rule throughout took 6,019 CG iterations and 5.4 s, the 0.1 rule 1,795 and 1.6 s;
    128 x 128 l2 = 0.05, 493 and 0.51 s against 448 and 0.24 s; 64 x 64 l6, 782 and 0.24 s against 549 and 0.13 s.

    Where the energy offers an exact solve (``newton_direct``, see the module text) and it gives a step, that step is
    taken instead of CG (``cg_iterations`` 0; ``direct_steps`` counts them): E_L's banded Cholesky on the smallest
    grids (:mod:`bftcore.models.banded_newton`), where CG's fixed costs per step are the larger part; right after a
    small step it reuses that step's factor once (a chord step, labelled ``newton-chord`` in the records).

    Holds, for one run, the preconditioner (the energy's ``newton_preconditioner``, reused while it reports itself
    still good), its strength (it starts cheap and switches to the strong form for good once a CG solve needs
    more than 50 iterations, see :class:`bftcore.models.density.SeparablePreconditioner`), the preconditioner's cache,
    the gradient norm at the start and the CG iterations of the last step (``cg_iterations``).
    """

    name = "newton"

    def __init__(self, energy, mass2: float, cg_maxiter: int):
        self.energy, self.cg_maxiter = energy, cg_maxiter
        self.precond, self.strong = None, False
        self.cache: dict = {}
        self.g0 = None
        self.cg_iterations = 0  # of the last step
        self.direct = None  # the energy's exact solve for this run (``newton_direct``), made at the first step
        self.direct_steps = 0  # the steps it solved

    def direction(self, point):
        E = self.energy
        G = point.gradient
        gn = None
        if self.g0 is None:  # the first direction is taken at the start
            gn = float(np.linalg.norm(G))
            self.g0 = max(gn, 1e-300)
            make = getattr(E, "newton_direct", None)
            self.direct = make() if make is not None else None
        if self.direct is not None:
            chords = getattr(self.direct, "chord_steps", 0)
            d = self.direct(point)
            if d is not None:  # the exact step; None where the Hessian is not positive definite: CG below
                self.cg_iterations = 0
                self.direct_steps += 1
                # a chord step (the previous step's factor reused, BandedRun) is labelled as such in the records
                chord = getattr(self.direct, "chord_steps", 0) > chords
                return d, self.name + "-chord" if chord else self.name, ()
        g0 = self.g0
        gn = float(np.linalg.norm(G)) if gn is None else gn  # (the exact step above needs no norm)
        rtol = max(1e-12, np.sqrt(gn / g0))
        if gn > E.newton_loose_until * g0:
            rtol = 0.1
        self.precond = E.newton_preconditioner(point, self.precond, self.strong, self.cache)
        curvature = []
        d, label, cg_its = newton_cg_direction(point, self.precond, rtol, self.cg_maxiter, curvature,
                                               convexified=E.saddle_escape)
        self.cg_iterations = cg_its
        if not self.strong and cg_its > 50:  # worth the stronger form from now on
            self.strong, self.precond = True, None
        return d, label, curvature


LEARNING_MATRICES = {m.name: m for m in (NewtonMatrix, MassiveMatrix, GradientMatrix)}


# --------------------------------------------------------------------------------------------------- the step
def at_energy_rounding(slope: float, value: float) -> bool:
    """Whether a Newton step's predicted change of the energy (``slope``, its directional derivative) is below
    the rounding of the energy ``value``: the minimiser's rounding floor (Newton on E_L and the evidence's bordered
    Newton both end there)."""
    return abs(slope) <= 1e-14 * max(1.0, abs(value))


class DescentStep:
    """One iteration on an unconstrained field: the direction of the learning matrix, then :func:`line_search`
    (Newton: Armijo backtracking from eta = 1; gradient, massive relaxation and Newton's fallback: the minimising
    search from the last accepted step length); for energies with ``saddle_escape``, a step along the negative
    curvature CG met (:func:`_curvature_step`), labelled ``"+curvature"``."""

    def __init__(self, energy, method: str, mass2: float, cg_maxiter: int, line_search):
        self.energy, self.line_search = energy, line_search
        self.matrix = LEARNING_MATRICES[method](energy, mass2, cg_maxiter)
        self.eta_prev = 1.0

    def take(self, phi: np.ndarray, point):
        """Returns ``(eta, new_phi, new_point, label)``; ``new_point`` is None when no decrease is possible."""
        energy = self.energy
        G = point.gradient
        d, label, curvature = self.matrix.direction(point)
        slope = float(np.vdot(G, d))
        exact = not label.startswith("newton") or label == "newton-fallback"
        eta0 = 1.0 if not exact else self.eta_prev
        if not slope < 0:
            return 0.0, phi, None, label
        if not exact and at_energy_rounding(slope, point.value):
            # Newton at the energy's rounding: the decrease it predicts is below what E resolves, so the line search
            # would backtrack to nothing.  The full step is kept if it halves the residual without raising E beyond
            # its rounding (1e-15 relative).
            # Decision: the residual decides, not Armijo's decrease, because E carries an additive constant that
            # depends on the units (-N ln c for y -> c y) and with it the point where the line search gives up:
            # data in other units stopped 1e-6 apart in ln p (tests/test_units.py)
            full_phi = energy.normalise(phi + d)
            full = energy.at(full_phi)
            if full.value <= point.value + 1e-15 * abs(point.value) and full.residual < 0.5 * point.residual:
                return 1.0, full_phi, full, label
        eta, new_phi, new_point = self.line_search(energy, phi, d, point.value, slope, eta0=eta0, exact=exact)
        if new_point is None:
            return eta, new_phi, None, label
        if curvature and energy.saddle_escape:  # leave a saddle along the negative curvature CG met
            moved_phi, moved_point = _curvature_step(energy, new_phi, new_point, curvature[0],
                                                     float(np.max(np.abs(new_phi - phi))))
            if moved_point is not new_point:
                new_phi, new_point, label = moved_phi, moved_point, label + "+curvature"
        if exact:
            self.eta_prev = eta
        return eta, new_phi, new_point, label


# --------------------------------------------------------------------------------------------- stopping rule
class IterationController:
    """The stopping rule of :func:`iterate` (NIFTy's ``IterationController``, for this solver's records).

    A run stops after ``max_iter`` iterations; or once ``min_iter`` are done, the field changed by less than
    ``tol`` (max-abs, the rule of Fig. 22) or the energy by less than 1e-15 relative, and the stationarity
    residual is at most ``max(sqrt(tol), 1e-12)`` (a tiny step alone is not convergence); or when a step finds no
    decrease of the energy: converged at machine precision (or stalled).
    """

    def __init__(self, min_iter: int, max_iter: int, tol: float):
        self.min_iter, self.max_iter, self.tol = min_iter, max_iter, tol

    def iterations(self) -> range:
        """The iteration numbers a run may take."""
        return range(1, self.max_iter + 1)

    @staticmethod
    def at_start(point) -> bool:
        """Whether the start already ends the run: never here (a run takes at least one step)."""
        return False

    @staticmethod
    def stalled(new_point) -> bool:
        """No decrease possible (the step returned no point): the run ends, converged at machine precision."""
        return new_point is None

    def converged(self, it: int, change: float, dE: float, point) -> bool:
        """Whether iteration ``it``, which moved the field by ``change`` (max-abs) and lowered the energy by
        ``dE`` to ``point``, ends the run as converged."""
        small = change < self.tol or dE <= 1e-15 * max(1.0, abs(point.value))
        return it >= self.min_iter and small and point.residual <= max(np.sqrt(self.tol), 1e-12)


# ------------------------------------------------------------------------------------------------- the run
def iterate(energy, phi0, method: str = "newton", mass2: float = 0.01, min_iter: int = 4, max_iter: int = 50,
            tol: float = 1e-8, cg_maxiter: int | None = None, step=None, controller=None):
    """Run a learning algorithm; yield a :class:`bftcore.foundations.records.Record` for the start and after every
    iteration.

    The minimiser's step and the stopping rule are separate objects, passed in or made here.  The stopping rule is
    ``controller`` (by default :class:`IterationController` of ``min_iter``, ``max_iter``, ``tol``): its
    ``iterations()``, ``at_start(point)``, ``stalled(new_point)`` and ``converged(it, change, dE, point)``.  The
    step is ``step`` (an object with ``take(phi, point)``, as :class:`DescentStep`), by default
    ``energy.minimiser_step`` (the active-set method for E_P) or :class:`DescentStep` with the learning matrix
    ``method`` (``"newton"``, ``"massive"`` with ``mass2`` = m^2 > 0, or ``"gradient"``).  ``cg_maxiter`` caps the CG
    iterations of one Newton step; by default it grows with the grid, ``min(1000, max(200, size // 16))``, as the
    conditioning of the Newton system does.  :func:`bftcore.foundations.limits.check_deadline` is called once per
    iteration. The evidence's Newton on the normalised densities (:func:`bftcore.models.evidence.map_newton`) is this
    minimiser with its own step (the exact KKT step) and stopping rule (the stationarity residual).
    """
    if method not in METHODS:
        raise ValueError(f"unknown solver method {method!r}; use one of {METHODS}")
    if method == "massive" and not (np.isfinite(mass2) and mass2 > 0):
        raise ValueError(f"massive relaxation needs mass2 > 0 (A = K + m^2 I is singular otherwise), got {mass2!r}")
    t0 = time.perf_counter()
    if cg_maxiter is None:
        cg_maxiter = int(min(1000, max(200, np.size(phi0) // 16)))
    controller = controller or IterationController(min_iter, max_iter, tol)
    step = step or (energy.minimiser_step or DescentStep)(energy, method, mass2, cg_maxiter, line_search)
    phi = energy.normalise(np.asarray(phi0, dtype=float))
    point = energy.at(phi)
    if not np.isfinite(point.value):
        raise SolverError("the energy is not finite at the initial field (for a prior on P the density must be "
                          "positive at every data point); choose another initialisation")
    done = controller.at_start(point)
    yield Record(iteration=0, energy=point.value, train_error=None, test_error=None, mixing=point.mixing, step=0.0,
                 residual=point.residual, method="start", converged=done, elapsed_s=time.perf_counter() - t0,
                 field=phi)
    if done:
        return
    for it in controller.iterations():
        check_deadline()  # a wall-clock budget of the caller (bftcore.foundations.limits.deadline), if any
        eta, new_phi, new_point, label = step.take(phi, point)
        if controller.stalled(new_point):
            yield Record(iteration=it, energy=point.value, train_error=None, test_error=None, mixing=point.mixing,
                         step=0.0, residual=point.residual, method=label, change=0.0, converged=True,
                         elapsed_s=time.perf_counter() - t0, field=phi)
            return
        change = float(abs(new_phi - phi).max())
        dE = point.value - new_point.value
        phi, point = new_phi, new_point
        total = float(phi.sum())  # NaN or +inf anywhere shows in the sum (-inf alone is L where P = 0)
        if not math.isfinite(point.value) or math.isnan(total) or total == math.inf:
            raise SolverError(f"iteration {it} produced a non-finite energy or field")
        converged = controller.converged(it, change, dE, point)
        yield Record(iteration=it, energy=point.value, train_error=None, test_error=None, mixing=point.mixing,
                     step=eta, residual=point.residual, method=label, change=change, converged=converged,
                     elapsed_s=time.perf_counter() - t0, field=phi)
        if converged:
            return
