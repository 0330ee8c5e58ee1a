"""Mixtures of Gaussian prior factors: mixing coefficients, reduced fixed points, beta sweeps, basins.

Shared by the density model (eqs. (713)-(718)) and by Gaussian regression with a mixture of Gaussian process
priors ([001] Sects. 4.2-4.5, CONVENTIONS.md §3).  This module holds the ONE implementation of the mixing
coefficients a_j and of the mixture energy; the energies of both models call it.
"""
from __future__ import annotations

import numpy as np


def _check_beta(beta) -> float:
    b = float(beta)
    if not (np.isfinite(b) and b > 0):
        raise ValueError(f"the mixture inverse temperature beta must be a finite number > 0, got {beta!r}")
    return b


def _check_weights(prior_energies, weights):
    E = np.asarray(prior_energies, dtype=float)
    p = np.asarray(weights, dtype=float)
    if E.ndim != 1 or p.shape != E.shape:
        raise ValueError(f"need one prior energy per mixture weight, got energies of shape {E.shape} "
                         f"and weights of shape {p.shape}")
    if E.size == 0:
        raise ValueError("a mixture needs at least one component")
    if np.any(~np.isfinite(p)) or np.any(p < 0) or not p.sum() > 0:
        raise ValueError(f"mixture weights p_j must be finite, >= 0 and not all zero, got {p.tolist()}")
    if np.any(np.isnan(E)):
        raise ValueError(f"prior energies contain NaN: {E.tolist()}")
    return E, p / p.sum()


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
    b = _check_beta(beta)
    E, p = _check_weights(prior_energies, weights)
    live = p > 0
    with np.errstate(under="ignore"):
        return _fast_mixing(E, p, None if live.all() else live, b)


def mixture_energy(prior_energies, weights, beta: float) -> float:
    """Mixture energy -(1/beta) ln sum_j p_j exp(-beta E_j) (eq. (713) with beta; (18) [001]), weights normalised.

    Written as ``E_min - (1/beta) log1p(sum_j p_j expm1(-beta (E_j - E_min)))`` so that it stays accurate both for
    beta -> 0 (where it tends to sum_j p_j E_j) and for beta -> infinity (where it tends to min_j E_j).
    """
    b = _check_beta(beta)
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
        beta = _check_beta(beta)
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
        beta = _check_beta(beta)
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

def _mixing_of(res) -> np.ndarray:
    return np.asarray(res["mixing"], dtype=float)


def _same_solution(r1, r2, mix_tol=1e-4, e_tol=1e-7) -> bool:
    a1, a2 = _mixing_of(r1), _mixing_of(r2)
    e1, e2 = float(r1["energy"]), float(r2["energy"])
    return bool(np.max(np.abs(a1 - a2)) <= mix_tol and abs(e1 - e2) <= e_tol * (1.0 + abs(e1)))


def continuation(solve, betas, init=None, direction="up") -> dict:
    """Follow one branch through ``betas`` in the given order, warm-starting each solve from the previous field."""
    branch = {"direction": direction, "beta": [], "mixing": [], "energy": [], "test_error": [], "stable": [],
              "converged": [], "_fields": []}
    field = init
    for b in betas:
        field, res = solve(float(b), field)
        branch["beta"].append(float(b))
        branch["mixing"].append([float(x) for x in res["mixing"]])
        branch["energy"].append(float(res["energy"]))
        te = res.get("test_error")
        branch["test_error"].append(None if te is None else float(te))
        branch["stable"].append(bool(res.get("stable", True)))
        branch["converged"].append(bool(res.get("converged", True)))
        if "exact_b" in res:
            branch.setdefault("b", []).append([float(x) for x in res["exact_b"]])
        branch["_fields"].append(field)
    return branch


def _refine_count_change(count_stable, lo, hi, c_lo, tol):
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if count_stable(mid) == c_lo:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def _refine_jump(solve, branch, k, jump_tol, tol):
    """Bisect the beta interval where a branch jumps between records k and k+1 (a fold: the branch ends).

    The verdict uses the mixing coefficients seen by the bisection itself: re-solving just past a fold from the
    continued field can sit on the nearly flat remains of the lost minimum (that is what metastability means),
    so a fresh solve there is no evidence against the jump."""
    lo, hi = branch["beta"][k], branch["beta"][k + 1]
    field, a_lo = branch["_fields"][k], np.asarray(branch["mixing"][k])
    a_hi = np.asarray(branch["mixing"][k + 1])
    for _ in range(60):
        if abs(hi - lo) <= tol:
            break
        mid = 0.5 * (lo + hi)
        f, r = solve(mid, field)
        if np.max(np.abs(_mixing_of(r) - a_lo)) < 0.5 * jump_tol:
            lo, field, a_lo = mid, f, _mixing_of(r)
        else:
            hi, a_hi = mid, _mixing_of(r)
    if np.max(np.abs(a_hi - a_lo)) < 0.5 * jump_tol:
        return None  # a steep but continuous change, not a fold
    return 0.5 * (lo + hi)


def beta_sweep(solve, betas, init=None, starts=(), count_stable=None, jump_tol=0.2, tol=1e-4) -> dict:
    """beta sweep with continuation: up from ``init`` at the smallest beta, then down from every distinct
    stable solution found at the largest beta (the end of the up branch and the solves from ``starts``, a list
    of ``(name, init)``).

    Hysteresis shows as an up and a down branch that differ over a beta interval.  Bifurcations are the betas
    where the number of stable solutions changes: from ``count_stable(beta)`` when the model can count its
    solutions (regression: all roots of (43) [001]), refined by bisection to ``tol``; otherwise the folds where
    a branch jumps (a change of some a_j by more than ``jump_tol`` between neighbouring betas that survives
    bisection of the interval down to ``tol``).
    """
    betas = np.unique(np.asarray(betas, dtype=float))
    if betas.size < 2 or np.any(betas <= 0) or not np.all(np.isfinite(betas)):
        raise ValueError("a beta sweep needs at least two distinct finite betas > 0")
    up = continuation(solve, betas, init, "up")
    tops = [(up["_fields"][-1], {"energy": up["energy"][-1], "mixing": up["mixing"][-1],
                                 "stable": up["stable"][-1]})]
    for _, s in starts:
        f, r = solve(float(betas[-1]), s)
        if r.get("stable", True) and not any(_same_solution(r, t) for _, t in tops):
            tops.append((f, r))
    branches = [up]
    for f, _ in tops:
        down = continuation(solve, betas[::-1], f, "down")
        branches.append(down)
    bifurcations, counts = [], None
    if count_stable is not None:
        counts = [int(count_stable(float(b))) for b in betas]
        for k in range(betas.size - 1):
            if counts[k] != counts[k + 1]:
                bifurcations.append(_refine_count_change(count_stable, betas[k], betas[k + 1], counts[k], tol))
        method = "count"
    else:
        for br in branches:
            mix = np.asarray(br["mixing"])
            for k in np.flatnonzero(np.max(np.abs(np.diff(mix, axis=0)), axis=1) > jump_tol):
                b = _refine_jump(solve, br, int(k), jump_tol, tol)
                if b is not None and all(abs(b - c) > 10 * tol for c in bifurcations):
                    bifurcations.append(b)
        method = "jump"
    for br in branches:
        del br["_fields"]
    out = {"branches": branches, "bifurcations": sorted(float(b) for b in bifurcations),
           "bifurcation_method": method}
    if counts is not None:
        out["stable_counts"] = counts
    return out


def find_basins(solve, starts, beta: float) -> list[dict]:
    """Solve from every start and return the distinct local minima, lowest energy first ([001] Sect. 4.2: the
    MAP equations of a mixture have several solutions).  Each minimum: energy, test_error, mixing, starts."""
    minima = []
    for name, init in starts:
        _, r = solve(float(beta), init)
        for mnm in minima:
            if _same_solution(r, mnm["_res"], mix_tol=1e-5):
                mnm["starts"].append(name)
                break
        else:
            minima.append({"energy": float(r["energy"]),
                           "test_error": None if r.get("test_error") is None else float(r["test_error"]),
                           "mixing": [float(x) for x in r["mixing"]], "stable": bool(r.get("stable", True)),
                           "converged": bool(r.get("converged", True)), "starts": [name], "_res": r})
    for mnm in minima:
        del mnm["_res"]
    return sorted(minima, key=lambda d: d["energy"])


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
    A = np.array(mix, dtype=float) if has_mix else None
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


# ----------------------------------------------------------------------------------------------------------------
# model adapters and the documents of CONVENTIONS.md §4
# ----------------------------------------------------------------------------------------------------------------
def regression_solver(model):
    """``solve(beta, init)`` for a :class:`bftcore.regression.RegressionModel` (the reduced route, (42)-(43)).
    ``init`` may be None (the complete average (41)), a field h, or an init name (``"template:0"``, ...)."""
    def solve(beta, init):
        if isinstance(init, str):
            init = model.initial_field(init)
        return model.solve_reduced(beta, init)
    return solve


def density_solver(config: dict):
    """``solve(beta, init)`` for a density config through ``bftcore.api.fit`` (field: L or P, as prior.field).
    ``init`` may be None (the config's solver.init), an init name such as ``"template:0"``, or an L field.
    Each result carries ``"stable"``: the smallest eigenvalue of the Hessian (160) at the solution, zero modes
    projected out, is >= 0 (:func:`bftcore.api.is_local_minimum`)."""
    try:
        from . import api
    except ImportError:
        raise NotImplementedError("density sweeps need bftcore.api (fit(config, init) -> result)") from None

    fld = "P" if (config.get("prior") or {}).get("field", "L") == "P" else "L"

    def solve(beta, init):
        cfg = {**config, "beta": float(beta)}
        if isinstance(init, str):
            cfg["solver"] = {**(config.get("solver") or {}), "init": init}
            init = None
        res = api.fit(cfg, init=init, check_stability=True)
        return np.asarray([[np.nan if v is None else v for v in row] for row in res[fld]], dtype=float), res
    return solve


def _model_and_starts(config: dict):
    """(solve, starts, count_stable, up_init) for a config of either model."""
    kind = config.get("model", "density")
    if kind == "regression":
        from .regression import RegressionModel
        model = RegressionModel.from_config(config)
        rng = np.random.default_rng(0)
        starts = [(f"template:{j}", f"template:{j}") for j in range(model.m)]
        starts += [("uniform", "uniform"), ("kernel", "kernel"), ("average", "average")]
        starts += [(f"random:{k}", rng.dirichlet(np.ones(model.m)) @ model.templates) for k in range(3)]
        up_init = (config.get("solver") or {}).get("init", "kernel")
        return regression_solver(model), starts, model.reduced.count_stable, up_init
    if kind == "density":
        solve = density_solver(config)
        n_t = len(config.get("templates") or [])
        starts = [(f"template:{j}", f"template:{j}") for j in range(n_t)]
        starts += [("uniform", "uniform"), ("kernel", "kernel"), ("empirical", "empirical")]
        return solve, starts, None, None
    raise ValueError(f"unknown model {kind!r}; use 'density' or 'regression'")


def sweep_document(config: dict, beta_min: float, beta_max: float, n: int) -> dict:
    """Sweep document (CONVENTIONS.md §4): ``branches`` (up, then down from each distinct stable solution at
    beta_max) and ``bifurcations``, for n betas evenly spaced in [beta_min, beta_max]."""
    import time
    if not (0 < beta_min < beta_max) or int(n) < 2:
        raise ValueError(f"need 0 < beta_min < beta_max and n >= 2, got {beta_min}, {beta_max}, {n}")
    t0 = time.perf_counter()
    solve, starts, count_stable, up_init = _model_and_starts(config)
    doc = beta_sweep(solve, np.linspace(beta_min, beta_max, int(n)), init=up_init, starts=starts,
                     count_stable=count_stable)
    doc.update({"model": config.get("model", "density"), "beta_min": float(beta_min), "beta_max": float(beta_max),
                "n": int(n), "elapsed_s": time.perf_counter() - t0})
    return doc


def basins_document(config: dict) -> dict:
    """Basins document (CONVENTIONS.md §4): the distinct local minima at the config's beta reached from each
    template, uniform, kernel (and, for regression, the average and three random template mixtures)."""
    import time
    t0 = time.perf_counter()
    beta = _check_beta(config.get("beta", 1.0))
    solve, starts, _, _ = _model_and_starts(config)
    minima = find_basins(solve, starts, beta)
    return {"model": config.get("model", "density"), "beta": beta, "starts": [s for s, _ in starts],
            "minima": minima, "elapsed_s": time.perf_counter() - t0}


def fig7_config() -> dict:
    """The 0-dimensional model of Fig 3 [001] / Fig 7 written as a regression on a one-node grid:
    K_D = 1 (one datum y = t_D = 0.1), K_0 = lambda hx l0 = 1, templates t_1 = 1, t_2 = -1, p = (1/2, 1/2)."""
    return {"model": "regression", "grid": {"x": {"min": 0.0, "max": 0.0, "n": 1, "boundary": "neumann"}},
            "data": [[0.0, 0.1]], "prior": {"lambda": 1.0, "l0": 1.0, "l2": 0.0, "l4": 0.0, "l6": 0.0},
            "templates": [{"kind": "constant", "value": 1.0}, {"kind": "constant", "value": -1.0}],
            "weights": [0.5, 0.5], "beta": 1.0, "solver": {"init": "kernel"}}


def fig7_document(beta_min: float = 0.05, beta_max: float = 4.0, n: int = 80) -> dict:
    """Sweep document of the Fig 7 / Fig 3 [001] example (b = 2, E~_2 - E~_1 = 0.1 beta): one solution at
    beta = 2, three (two stable) at beta = 4, the saddle-node bifurcation near beta = 2.75 located by bisection.
    Adds ``solutions``: every fixed point (a_1, stable) at beta = 2, 2.75, 4."""
    cfg = fig7_config()
    doc = sweep_document(cfg, beta_min, beta_max, n)
    model = zero_dimensional_model()
    doc["solutions"] = {str(b): [{"a1": float(s["mixing"][0]), "stable": s["stable"],
                                  "energy": float(s["energy"])} for s in model.fixed_points(b)]
                        for b in (2.0, 2.75, 4.0)}
    doc["name"] = "fig7"
    return doc
