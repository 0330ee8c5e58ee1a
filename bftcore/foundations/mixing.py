"""Mixtures of Gaussian prior factors, the formulas: mixing coefficients, mixture energy, the reduced fixed point.

Shared by the density model (eqs. (713)-(718)) and by Gaussian regression with a mixture of Gaussian process
priors ([001] Sects. 4.2-4.5, CONVENTIONS.md §3).  This module holds the ONE implementation of the mixing
coefficients a_j and of the mixture energy (the energies of both models call it), the reduced fixed point of
equal-covariance mixtures with the 0-dimensional example of Fig 7, and the plateau detection of an iteration
history.  It imports only the constants of :mod:`bftcore.foundations.limits`: the workflows over many fits (sweeps,
basins) are in :mod:`bftcore.studies.workflows`, above the problems.
"""
from __future__ import annotations

import numpy as np

from .limits import MAX_MAGNITUDE, MAX_SCALED_MAGNITUDE, MIN_BETA


def check_beta(beta, units: bool = False) -> float:
    """The one rule for the mixture inverse temperature: a finite number in ``[MIN_BETA, MAX_MAGNITUDE]``
    (1e-12 to 1e12; its inverse scales the mixture energy).  The gate applies the same range to a document's
    ``beta`` (naming the key); the formulas and models call this for direct use.  ``units``: a beta with units
    (regression's, 1 / the noise variance, in units of 1/y^2), any positive number in the floating-point range
    (``MAX_SCALED_MAGNITUDE``), as the gate has it for a regression document."""
    b = float(beta)
    if units:
        if not (np.isfinite(b) and 0 < b <= MAX_SCALED_MAGNITUDE):
            raise ValueError(f"beta (1 / the noise variance) must be a finite number > 0, got {beta!r}")
        return b
    if not (np.isfinite(b) and MIN_BETA <= b <= MAX_MAGNITUDE):
        raise ValueError(f"the mixture inverse temperature beta must be a finite number in "
                         f"[{MIN_BETA:g}, {MAX_MAGNITUDE:g}], got {beta!r}")
    return b




def check_weights(weights, m: int) -> np.ndarray:
    """The one rule for mixture weights p_j: m finite numbers >= 0, not all zero; returned normalised to sum 1.
    ``None`` means equal weights."""
    p = np.full(m, 1.0 / m) if weights is None else np.asarray(weights, dtype=float)
    if weights is None and m >= 1:  # equal weights pass the checks below: skip them (a fit's every build asks)
        return p / p.sum()
    if p.shape != (m,) or np.any(~np.isfinite(p)) or np.any(p < 0) or not p.sum() > 0:
        raise ValueError(f"mixture weights p_j must be {m} finite numbers >= 0 (one per template), not all zero; "
                         f"got {p.tolist() if p.ndim else weights!r}")
    return p / p.sum()


def _check_weights(prior_energies, weights):
    E = np.asarray(prior_energies, dtype=float)
    p = np.asarray(weights, dtype=float)
    if E.ndim != 1 or p.shape != E.shape:
        raise ValueError(f"need one prior energy per mixture weight, got energies of shape {E.shape} "
                         f"and weights of shape {p.shape}")
    if E.size == 0:
        raise ValueError("a mixture needs at least one component")
    if np.any(np.isnan(E)):
        raise ValueError(f"prior energies contain NaN: {E.tolist()}")
    return E, check_weights(p, E.size)


def _fast_mixing(E, p, live, beta):
    """mixing_coefficients without validation (p normalised, ``live = p > 0`` or None when all are).

    In log space, ``ln p_j - beta (E_j - E_min)`` shifted by its maximum: a tiny p_j at the lowest energy (say
    1e-79) with the other components far above it underflows nothing and divides by no zero."""
    with np.errstate(divide="ignore"):
        a = np.log(p) - beta * (E - (E.min() if live is None else np.min(E[live])))
    if live is not None:
        a = np.where(live, a, -np.inf)
    w = np.exp(a - np.max(a))
    return w / w.sum()


def _fast_energy(E, p, live, beta):
    """mixture_energy without validation.

    ``E_min - log1p(s) / beta`` with ``s = sum_j p_j expm1(-beta (E_j - E_min))`` is accurate for small beta; when
    ``s`` is near -1 (the component at E_min has a tiny p_j) log1p loses everything, so there the log-sum-exp
    ``E_min - (1/beta) ln sum_j exp(ln p_j - beta (E_j - E_min))`` is used instead."""
    if live is not None:
        E, p = E[live], p[live]
    e_min = E.min()
    s = float(np.sum(p * np.expm1(-beta * (E - e_min))))
    if s > -0.5:
        return float(e_min - np.log1p(s) / beta)
    a = np.log(p) - beta * (E - e_min)
    top = float(np.max(a))
    return float(e_min - (top + np.log(np.sum(np.exp(a - top)))) / beta)


def mixing_coefficients(prior_energies, weights, beta: float) -> np.ndarray:
    """Mixing coefficients a_j = p_j exp(-beta E_j) / sum_k p_k exp(-beta E_k), eq. (718) with beta.

    ``prior_energies`` already include lambda (density: ``lambda * E_0j``, eq. (715); regression: the component
    prior energy ``(lambda/2)(h - t_j, K_X (h - t_j))``, eq. (23) [001]).  Computed relative to the smallest energy
    of a component with p_j > 0, so nothing overflows for beta in [1e-6, 1e6] and beyond; components with
    p_j = 0 get a_j = 0.
    """
    b = check_beta(beta, units=True)
    E, p = _check_weights(prior_energies, weights)
    live = p > 0
    with np.errstate(under="ignore"):
        return _fast_mixing(E, p, None if live.all() else live, b)


def mixture_energy(prior_energies, weights, beta: float) -> float:
    """Mixture energy -(1/beta) ln sum_j p_j exp(-beta E_j) (eq. (713) with beta; (18) [001]), weights normalised.

    Written as ``E_min - (1/beta) log1p(sum_j p_j expm1(-beta (E_j - E_min)))`` so that it stays accurate both for
    beta -> 0 (where it tends to sum_j p_j E_j) and for beta -> infinity (where it tends to min_j E_j).
    """
    b = check_beta(beta, units=True)
    E, p = _check_weights(prior_energies, weights)
    live = p > 0
    with np.errstate(under="ignore"):
        return _fast_energy(E, p, None if live.all() else live, b)


def mean_field_rhs(a1, beta: float, b: float, e_diff: float):
    """Right-hand side of the m = 2 mean-field equation (46) [001]: ``(tanh Delta + 1) / 2`` with
    ``Delta = (beta/4) b (2 a_1 - 1) + e_diff / 2`` (45), ``e_diff = E~_2 - E~_1`` (for the Fig 3 model 0.1 beta)."""
    a1 = np.asarray(a1, dtype=float)
    return 0.5 * (np.tanh(0.25 * beta * b * (2 * a1 - 1) + 0.5 * e_diff) + 1.0)


class ReducedMixture:
    """The reduced fixed-point problem (43) [001] of a mixture with equal covariances.

    With equal inverse covariances every MAP solution is a convex combination ``h = sum_j a_j t̄_j`` of the
    component solutions (42), and the component energies are ``E_hj(h) = V_j + (1/2) a^T B_j a`` (+ a common
    ``offset``), eqs. (39), (40), (43).  All of it is fixed by the weights p_j, the template variances V_j and the
    Gram matrix ``G_kl = (t̄_k - t̄_1, (K_T + K_0)(t̄_l - t̄_1)) = B_1(k, l)``.  Writing ``G = Y Y^T`` places the
    t̄_j at points ``Y_j`` of a Euclidean space of dimension r <= m - 1 in which
    ``E_hj = V_j + |y - Y_j|^2 / 2``: the mixture energy becomes a function of r unknowns y (h = t̄_1 + ...),
    its gradient is ``y - sum_j a_j Y_j`` (the fixed point (43)) and its Hessian ``I - beta Cov_a(Y)``, whose
    positive definiteness is the stability test; ``beta Cov_a(Y)`` is the Jacobian of the fixed-point map.
    """

    def __init__(self, weights, variances, gram, offset: float = 0.0):
        p = np.asarray(weights, dtype=float)
        V = np.asarray(variances, dtype=float)
        G = np.asarray(gram, dtype=float)
        m = p.size
        if V.shape != (m,) or G.shape != (m, m):
            raise ValueError(f"need m weights, m variances and an m x m Gram matrix; got shapes {p.shape}, "
                             f"{V.shape}, {G.shape}")
        _check_weights(V, p)
        self.weights = p / p.sum()
        self._live = None if np.all(self.weights > 0) else self.weights > 0
        self.variances = V
        self.gram = 0.5 * (G + G.T)
        self.offset = float(offset)
        lam, Q = np.linalg.eigh(self.gram)
        keep = lam > 1e-12 * max(1.0, float(np.max(np.abs(lam))))
        self.centres = Q[:, keep] * np.sqrt(lam[keep])   # (m, r): Y_j, with Y_j . Y_k = G_jk
        self.centres = self.centres - self.centres[0]    # t̄_1 at the origin (exact G has Y_1 = 0)

    @property
    def m(self) -> int:
        return self.weights.size

    @property
    def dim(self) -> int:
        return self.centres.shape[1]

    @property
    def B(self) -> np.ndarray:
        """Matrices B_j(k, l) = (t̄_k - t̄_j, (K_T + K_0)(t̄_l - t̄_j)), eq. (39) [001]; shape (m, m, m)."""
        G = self.gram
        d = np.diag(G)
        return G[None, :, :] - G[:, :, None] - G[:, None, :] + d[:, None, None]

    # --- the reduced energy in the coordinates y -------------------------------------------------------------
    def point(self, a) -> np.ndarray:
        """Coordinates y of h = sum_j a_j t̄_j."""
        return np.asarray(a, dtype=float) @ self.centres

    def component_energies(self, y) -> np.ndarray:
        """E_hj(h) = V_j + |y - Y_j|^2 / 2 (+ offset), eq. (43) [001]."""
        d = np.asarray(y, dtype=float)[None, :] - self.centres
        return self.variances + 0.5 * np.einsum("jk,jk->j", d, d) + self.offset

    def mixing(self, y, beta: float) -> np.ndarray:
        """a_j at h(y), eq. (23)/(43) [001]."""
        return _fast_mixing(self.component_energies(y), self.weights, self._live, float(beta))

    def energy(self, y, beta: float) -> float:
        """Mixture energy -(1/beta) ln sum_j p_j exp(-beta E_hj), eq. (18) [001] divided by beta."""
        return _fast_energy(self.component_energies(y), self.weights, self._live, float(beta))

    def gradient(self, y, beta: float) -> np.ndarray:
        a = self.mixing(y, beta)
        return np.asarray(y, dtype=float) - a @ self.centres

    def map_jacobian(self, y, beta: float, a=None) -> np.ndarray:
        """Jacobian ``beta Cov_a(Y)`` of the fixed-point map y -> sum_j a_j(y) Y_j (r x r)."""
        a = self.mixing(y, beta) if a is None else a
        c = self.centres - a @ self.centres
        return beta * (c.T * a) @ c

    def stability(self, y, beta: float) -> float:
        """Largest eigenvalue of the fixed-point Jacobian; < 1 means a stable solution (Hessian > 0)."""
        if self.dim == 0:
            return 0.0
        return float(np.max(np.linalg.eigvalsh(self.map_jacobian(y, beta))))

    def solution(self, y, beta: float) -> dict:
        y = np.asarray(y, dtype=float)
        a = self.mixing(y, beta)
        lam = self.stability(y, beta)
        return {"y": y, "mixing": a, "energy": self.energy(y, beta), "jacobian_max_eig": lam,
                "stable": bool(lam < 1.0), "residual": float(np.linalg.norm(self.gradient(y, beta)))}

    # --- solving ---------------------------------------------------------------------------------------------
    def minimize(self, beta: float, y0=None, tol: float = 1e-12, max_iter: int = 200) -> dict:
        """Local minimum of the reduced energy from y0 (default: the complete template average (41)).

        Newton on the r <= m - 1 unknowns with the Hessian ``I - beta Cov_a`` shifted to be positive definite and a
        backtracking line search on the energy: a descent method, so a warm start slides into the minimum of its
        own basin and never onto a saddle (what a continuation in beta needs).
        """
        beta = check_beta(beta, units=True)
        y = self.point(self.weights) if y0 is None else np.array(y0, dtype=float)
        if self.dim == 0:
            return {**self.solution(np.zeros(0), beta), "iterations": 0, "converged": True}
        scale = 1.0 + float(np.max(np.abs(self.centres)))
        E = self.energy(y, beta)
        for it in range(1, max_iter + 1):
            a = self.mixing(y, beta)
            g = y - a @ self.centres
            if np.linalg.norm(g) <= tol * scale:
                return {**self.solution(y, beta), "iterations": it - 1, "converged": True}
            H = np.eye(self.dim) - self.map_jacobian(y, beta, a)
            w, Q = np.linalg.eigh(H)
            w = np.maximum(np.abs(w), 1e-3)  # saddle-free Newton: flip negative curvature, bound tiny curvature
            step = -(Q @ ((Q.T @ g) / w))
            eta = 1.0
            while True:
                y_new = y + eta * step
                E_new = self.energy(y_new, beta)
                if E_new <= E + 1e-4 * eta * float(g @ step) or eta < 1e-12:
                    break
                eta *= 0.5
            if E_new > E and eta < 1e-12:
                break
            converged_step = np.linalg.norm(y_new - y) <= 1e-15 * scale
            y, E = y_new, E_new
            if converged_step:
                break
        g = self.gradient(y, beta)
        return {**self.solution(y, beta), "iterations": it,
                "converged": bool(np.linalg.norm(g) <= max(tol, 1e-9) * scale)}

    def _newton_root(self, beta, y0, max_iter=100):
        """Newton on the fixed-point residual y - sum_j a_j Y_j (finds saddles as well as minima)."""
        y = np.array(y0, dtype=float)
        scale = 1.0 + float(np.max(np.abs(self.centres)))
        for _ in range(max_iter):
            g = self.gradient(y, beta)
            if np.linalg.norm(g) <= 1e-12 * scale:
                return y
            H = np.eye(self.dim) - self.map_jacobian(y, beta)
            try:
                step = -np.linalg.solve(H, g)
            except np.linalg.LinAlgError:
                return None
            eta = 1.0
            while np.linalg.norm(self.gradient(y + eta * step, beta)) >= np.linalg.norm(g) and eta > 1e-10:
                eta *= 0.5
            y = y + eta * step
        return y if np.linalg.norm(self.gradient(y, beta)) <= 1e-9 * scale else None

    def fixed_points(self, beta: float, n_random: int = 20, seed: int = 0) -> list[dict]:
        """All solutions of the reduced fixed point (43) [001] at this beta, with their stability, sorted by a_1.

        m = 2: exact, from the mean-field form (44)-(46): in ``u = ln(a_1/a_2)`` the equation is
        ``u = kappa + (beta b / 2) tanh(u/2)``, ``kappa = ln(p_1/p_2) - beta (V_1 - V_2)``, monotone between the
        critical points ``u = +-2 arccosh(sqrt(beta b / 4))``, so every root is bracketed and found by brentq.
        m > 2: Newton on the residual from the t̄_j, the average (41), the edge midpoints and random convex
        combinations, plus descent from the same starts; distinct roots are kept (complete in practice, not
        guaranteed).
        """
        beta = check_beta(beta, units=True)
        if self.dim == 0:
            return [self.solution(np.zeros(0), beta)]
        if self.m == 2 and self.dim == 1:
            return [self.solution(y, beta) for y in self._two_component_roots(beta)]
        rng = np.random.default_rng(seed)
        starts = [self.centres[j] for j in range(self.m)] + [self.point(self.weights)]
        starts += [(self.centres[j] + self.centres[k]) / 2 for j in range(self.m) for k in range(j)]
        starts += [self.point(rng.dirichlet(np.ones(self.m))) for _ in range(n_random)]
        found = []
        for s in starts:
            for y in (self._newton_root(beta, s), self.minimize(beta, s)["y"]):
                if y is not None and np.linalg.norm(self.gradient(y, beta)) < 1e-8 * (1 + np.abs(y).max()):
                    found.append(y)
        return [self.solution(y, beta) for y in _distinct(found)]

    def _two_component_roots(self, beta):
        from scipy.optimize import brentq
        (y1,), (y2,) = self.centres
        b = (y1 - y2) ** 2
        p1, p2 = self.weights
        if p1 == 0 or p2 == 0:
            return [self.minimize(beta)["y"]]
        kappa = np.log(p1 / p2) - beta * (self.variances[0] - self.variances[1])
        c = 0.5 * beta * b

        def g(u):
            return u - kappa - c * np.tanh(0.5 * u)

        lo, hi = kappa - c - 1.0, kappa + c + 1.0
        knots = [lo, hi]
        if c / 2 > 1.0:
            uc = 2.0 * np.arccosh(np.sqrt(c / 2))
            knots += [u for u in (-uc, uc) if lo < u < hi]
        knots = sorted(knots)
        roots = []
        for u0, u1 in zip(knots[:-1], knots[1:]):
            g0, g1 = g(u0), g(u1)
            if g0 == 0.0:
                roots.append(u0)
            elif g0 * g1 < 0:
                roots.append(brentq(g, u0, u1, xtol=1e-14 * max(1.0, abs(u0), abs(u1)), rtol=1e-15))
        if g(knots[-1]) == 0.0:
            roots.append(knots[-1])
        a1 = 0.5 * (np.tanh(0.5 * np.array(sorted(set(roots)))) + 1.0)
        return [np.array([y2 + a * (y1 - y2)]) for a in a1]

    def count_stable(self, beta: float) -> int:
        return sum(s["stable"] for s in self.fixed_points(beta))

    def tanh_form(self, beta: float) -> tuple[float, float]:
        """(b, E~_2 - E~_1) of the m = 2 mean-field equation (45) [001], E~_j = beta V_j - ln p_j."""
        if self.m != 2:
            raise ValueError(f"the tanh form (44)-(46) is for two components, this mixture has {self.m}")
        b = float(self.gram[1, 1] - 2 * self.gram[0, 1] + self.gram[0, 0])
        e = beta * self.variances - np.log(self.weights)
        return b, float(e[1] - e[0])


def _distinct(points, tol=1e-7):
    out = []
    for y in points:
        if all(np.linalg.norm(y - z) > tol * (1 + np.linalg.norm(z)) for z in out):
            out.append(y)
    return out


def zero_dimensional_model() -> ReducedMixture:
    """The 0-dimensional model of Fig 3 [001] / Fig 7: t_1 = 1, t_2 = -1, t_D = 0.1, K_D = K_0 = 1, p = (1/2, 1/2).

    Then t̄_j = (t_D + t_j)/2 = 0.55, -0.45, V_j = (t_D - t_j)^2 / 4 = 0.2025, 0.3025 (40), so
    E~_2 - E~_1 = beta (V_2 - V_1) = 0.1 beta, and b = (K_D + K_0)(t̄_1 - t̄_2)^2 = 2.
    """
    t, tD, KD, K0 = np.array([1.0, -1.0]), 0.1, 1.0, 1.0
    tbar = (KD * tD + K0 * t) / (KD + K0)
    V = 0.5 * (KD * tD ** 2 + K0 * t ** 2 - (KD + K0) * tbar ** 2)
    d = tbar - tbar[0]
    return ReducedMixture([0.5, 0.5], V, (KD + K0) * np.outer(d, d))


# ----------------------------------------------------------------------------------------------------------------
# metastability tools, written against solve(beta, init) -> (field, result)
# ----------------------------------------------------------------------------------------------------------------
# ``result`` has at least "energy", "test_error" (may be None) and "mixing"; optionally "stable" (default True: a
# solve is a descent method, so what it returns is taken as a local minimum) and "exact_b".


def detect_plateaus(history, rel_tol=1e-3, min_length=3, drop=0.05, mix_tol=1e-2, mix_move=0.1) -> list[dict]:
    """Plateaus of an iteration history: a run that stalls near one solution and later decays to another
    (the story of Fig 28).

    Iteration k stalls when its energy change is below ``rel_tol`` times the total energy decrease of the run and
    (if records carry ``mixing``) no a_j moves by more than ``mix_tol``.  A run of at least ``min_length``
    stalled iterations is a plateau if afterwards the energy still falls by at least ``drop`` times the total
    decrease or some a_j still moves by at least ``mix_move``.  Returns ``{"start", "end", "energy", "mixing",
    "end_mixing", "final_energy", "final_mixing"}`` per plateau: start/end are iteration numbers of the records,
    energy and mixing are where the run stalled (the plateau's start), end_mixing where it left the plateau.
    ``mix_tol`` = 0.01 lets a slow drift of the a_j along a metastable valley count as a stall.
    """
    recs = list(history)
    if len(recs) < min_length + 2:
        return []
    get = (lambda r, k, d=None: r.get(k, d)) if isinstance(recs[0], dict) else \
        (lambda r, k, d=None: getattr(r, k, d))
    E = np.array([float(get(r, "energy")) for r in recs])
    its = [int(get(r, "iteration", i)) for i, r in enumerate(recs)]
    mix = [get(r, "mixing") for r in recs]
    has_mix = all(m is not None for m in mix)
    A = np.array(mix, dtype=float) if has_mix else np.zeros((len(recs), 0))
    total = max(float(E.max() - E[-1]), 1e-300)
    stall = np.zeros(len(recs), bool)
    for k in range(1, len(recs)):
        s = abs(E[k] - E[k - 1]) <= rel_tol * total
        if has_mix:
            s = s and float(np.max(np.abs(A[k] - A[k - 1]))) <= mix_tol
        stall[k] = s
    out, k = [], 1
    while k < len(recs):
        if not stall[k]:
            k += 1
            continue
        j = k
        while j + 1 < len(recs) and stall[j + 1]:
            j += 1
        start, end = k - 1, j
        if end - start >= min_length:
            later_drop = E[end] - E[-1] >= drop * total
            later_move = has_mix and float(np.max(np.abs(A[end] - A[-1]))) >= mix_move
            if later_drop or later_move:
                out.append({"start": its[start], "end": its[end], "energy": float(E[start]),
                            "mixing": None if not has_mix else A[start].tolist(),
                            "end_mixing": None if not has_mix else A[end].tolist(),
                            "final_energy": float(E[-1]), "final_mixing": None if not has_mix else A[-1].tolist()})
        k = j + 1
    return out


def fig7_config() -> dict:
    """The 0-dimensional model of Fig 3 [001] / Fig 7 written as a regression on a one-node grid:
    K_D = 1 (one datum y = t_D = 0.1), K_0 = lambda hx l0 = 1, templates t_1 = 1, t_2 = -1, p = (1/2, 1/2)."""
    return {"model": "regression", "grid": {"x": {"min": 0.0, "max": 0.0, "n": 1, "boundary": "neumann"}},
            "data": [[0.0, 0.1]], "prior": {"lambda": 1.0, "l0": 1.0, "l2": 0.0, "l4": 0.0, "l6": 0.0},
            "templates": [{"kind": "constant", "value": 1.0}, {"kind": "constant", "value": -1.0}],
            "weights": [0.5, 0.5], "beta": 1.0, "solver": {"init": "kernel"}}
