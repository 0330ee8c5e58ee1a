"""Non-quadratic prior potentials psi (Sect. 6.5, eqs. (589)-(595), Fig. 12) and robust data terms rho
(Sect. 3.7.4, Fig. 5): values, derivatives and the weights of iteratively reweighted least squares.

A prior potential acts on the filtered differences ``omega = W (phi - t)`` (589), a data term on the residuals
``e = h(x_i) - y_i``; both enter an energy as sums, ``lambda hx sum_e psi(omega_e)`` and ``sum_i rho(e_i)``
(:mod:`bftcore.models.robust`).  Every function here is a pure, vectorised function of its first argument.

The Fig. 12 family (Geman-McClure for gamma = 2)

    psi(s) = a (1 - 1/(1 + (|s - s0|/b)^gamma)),    psi(s0) = 0,  psi(s0 +- b) = a/2,  psi(+-inf) = a,
    psi'(s) = a gamma r^(gamma-1) sgn(s - s0) / (b (1 + r^gamma)^2),    r = |s - s0| / b,

with three presets from Fig. 12: ``cup`` (a = 1, b = 3, gamma = 2), ``cusp`` (a = 5, b = 10, gamma = 0.7: Winkler's
cup function) and ``inverted_cup`` (a = -4.8, b = 15, gamma = 2: the "reaction term", psi <= 0).
Decision (an erratum of the caption): Fig. 12's caption puts "with cusp" on panel (b), gamma = 2, which is smooth
at s0 (psi'' = 2a/b^2); only gamma < 1, panel (a), has a cusp (psi' -> +-inf at s0).  The presets are named by
their shape, not by the panel letter.  ``quadratic``, psi(s) = (s - s0)^2 / 2, is the Gaussian member: with it
the prior is the Gaussian one of :mod:`bftcore.models.regression`.

Units: s, s0 and b are in the units of ``W h`` (for the first-difference filter over the spacing, y per unit of x:
a slope); gamma is a pure number; a is an energy (nats) per unit length of x: in ``lambda hx sum_e psi`` a
saturated edge costs ``lambda hx a``, so only the product lambda a matters.  Fig. 12's b is in grey levels (0-255)
between neighbouring pixels: :func:`slope_from_grey_levels` turns it into a slope for data of another range and
spacing, but that rescaling ignores the noise, and b has to sit above the noise's slopes and below the jumps' (the
demo of :mod:`bftcore.models.robust` measures both choices).  How the parameters transform under x -> alpha x,
y -> c y: :meth:`PriorPotential.scaled`, :meth:`DataTerm.scaled` and the module docstring of
:mod:`bftcore.models.robust`.

The robust data terms (Fig. 5) are negative log-likelihoods of a residual e, shifted so that rho(0) = 0:

* ``gaussian``: e^2 / (2 sigma^2);
* ``mixture2``: -ln(1/2 N(e; mu, sigma^2) + 1/2 N(e; -mu, sigma^2)) + c, in closed form
  ``e^2/(2 sigma^2) - ln cosh(mu e / sigma^2)``, which is ``e^2/2 - ln cosh e`` for sigma = mu = 1, flat
  (quartic, e^4/12) at 0;
* ``mixture11``: -ln of an equal-weight mixture of 11 equal-variance Gaussians at k mu, k = -5..5, + c: nearly flat
  on the span of the means, quadratic outside;
* ``insensitive``: Vapnik's epsilon-insensitive error ``|e|_eps / sigma = max(|e| - eps, 0) / sigma``, zero on
  ``|e| <= eps``, slope 1/sigma outside (sigma = 1 is the paper's |e|_eps; sigma makes it a pure number).

sigma, mu and eps are in the units of y.

IRLS (half-quadratic) weights: ``w(s) = psi'(s) / (s - s0)`` (``rho'(e) / e`` for a data term), so that the
gradient is ``W^T diag(w) (omega - s0)``: the energy's gradient is that of a quadratic form with these weights, and
one IRLS iteration solves that quadratic problem.  Decision: near the centre the weight is evaluated at
``|s - s0| = clip`` (``clip`` = 1e-6 b for a potential, 1e-6 sigma for a data term, unless given), because for
gamma < 1 the weight ``~ |s - s0|^(gamma - 2)`` is infinite at the cusp ("the cusp requires special treatment",
Sect. 6.5); for gamma >= 2 the clip changes the weight by less than 1e-12 relative.  At the centre itself psi' is
taken as 0 (sgn(0) = 0), the symmetric choice of the subgradient.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logsumexp

#: The named prior potentials of Fig. 12 (see the module docstring for the caption's erratum) and the Gaussian one.
POTENTIAL_PRESETS: dict[str, dict] = {
    "quadratic": {},
    "cup": {"a": 1.0, "b": 3.0, "gamma": 2.0},
    "cusp": {"a": 5.0, "b": 10.0, "gamma": 0.7},
    "inverted_cup": {"a": -4.8, "b": 15.0, "gamma": 2.0},
}

#: The robust data terms of Fig. 5 and the Gaussian one, with the parameters each takes.
DATA_TERMS: dict[str, tuple[str, ...]] = {
    "gaussian": ("sigma",),
    "mixture2": ("sigma", "mu"),
    "mixture11": ("sigma", "mu"),
    "insensitive": ("sigma", "eps"),
}

#: Relative size of the default clip of the IRLS weights (times b or sigma).
CLIP = 1e-6


# ------------------------------------------------------------------------------------------ the Fig. 12 family
def _check_family(a, b, gamma) -> None:
    if not (np.isfinite(a) and a != 0):
        raise ValueError(f"potential a must be a finite non-zero number (its height, psi(inf) = a), got {a!r}")
    if not (np.isfinite(b) and b > 0):
        raise ValueError(f"potential b must be > 0 (the scale where psi = a/2, in units of W h), got {b!r}")
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"potential gamma must be > 0 (gamma < 1 gives a cusp, 2 the smooth cup), got {gamma!r}")


def cup(s, a: float = 1.0, b: float = 3.0, gamma: float = 2.0, s0: float = 0.0) -> np.ndarray:
    """psi(s) = a (1 - 1/(1 + (|s - s0|/b)^gamma)), the potentials of Fig. 12 (as a logistic function of
    gamma ln r, so that no power overflows)."""
    _check_family(a, b, gamma)
    r = np.abs(np.asarray(s, dtype=float) - s0) / b
    with np.errstate(divide="ignore"):
        return a * expit(gamma * np.log(r))


def cup_derivative(s, a: float = 1.0, b: float = 3.0, gamma: float = 2.0, s0: float = 0.0) -> np.ndarray:
    """psi'(s) = a gamma r^(gamma-1) sgn(s - s0) / (b (1 + r^gamma)^2), r = |s - s0|/b; 0 at s = s0 (sgn(0) = 0,
    also for gamma < 1 where the one-sided limits are +-inf)."""
    _check_family(a, b, gamma)
    d = np.asarray(s, dtype=float) - s0
    r = np.abs(d) / b
    with np.errstate(divide="ignore", invalid="ignore"):
        p = expit(gamma * np.log(r))
        out = a * gamma * p * (1.0 - p) / (r * b) * np.sign(d)
    return np.where(d == 0, 0.0, out)


def cup_second_derivative(s, a: float = 1.0, b: float = 3.0, gamma: float = 2.0, s0: float = 0.0,
                          clip: float = 0.0) -> np.ndarray:
    """psi''(s) = a gamma P (1 - P) (gamma (1 - 2P) - 1) / (s - s0)^2 with P = psi / a, evaluated at
    ``|s - s0| >= clip`` (the cusp's psi'' is -inf at s0; for gamma = 2 the limit at s0 is 2a/b^2)."""
    _check_family(a, b, gamma)
    d = np.maximum(np.abs(np.asarray(s, dtype=float) - s0), clip)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = expit(gamma * np.log(d / b))
        out = a * gamma * p * (1.0 - p) * (gamma * (1.0 - 2.0 * p) - 1.0) / d ** 2
    if gamma == 2:
        out = np.where(d == 0, 2.0 * a / b ** 2, out)
    return out


def quadratic(s, s0: float = 0.0) -> np.ndarray:
    """psi(s) = (s - s0)^2 / 2, the Gaussian prior's potential."""
    return 0.5 * (np.asarray(s, dtype=float) - s0) ** 2


def quadratic_derivative(s, s0: float = 0.0) -> np.ndarray:
    return np.asarray(s, dtype=float) - s0


def irls_weight(s, derivative, s0: float = 0.0, clip: float = 1e-6) -> np.ndarray:
    """w(s) = f'(s) / (s - s0) for a derivative function f' (one argument), evaluated at ``s0 +- clip`` where
    ``|s - s0| < clip`` (module docstring: the cusp's clip).  ``clip`` must be > 0."""
    if not (np.isfinite(clip) and clip > 0):
        raise ValueError(f"clip must be > 0 (the IRLS weight is evaluated at |s - s0| >= clip), got {clip!r}")
    d = np.asarray(s, dtype=float) - s0
    m = np.maximum(np.abs(d), clip)
    return np.asarray(derivative(s0 + m), dtype=float) / m


def slope_from_grey_levels(b_grey: float, y_range: float, spacing: float) -> float:
    """Fig. 12's b (grey levels 0-255 between neighbouring pixels) as a slope for data whose full range is
    ``y_range`` sampled every ``spacing`` in x: ``b_grey / 255 * y_range / spacing``."""
    return float(b_grey) / 255.0 * float(y_range) / float(spacing)


@dataclass(frozen=True)
class PriorPotential:
    """A prior potential psi with its parameters: ``kind`` is ``"quadratic"`` or ``"family"`` (the Fig. 12 form).
    Build it with :func:`prior_potential`."""

    name: str
    kind: str
    a: float = 1.0
    b: float = 1.0
    gamma: float = 2.0
    s0: float = 0.0
    clip: float = CLIP

    def value(self, s) -> np.ndarray:
        if self.kind == "quadratic":
            return quadratic(s, self.s0)
        return cup(s, self.a, self.b, self.gamma, self.s0)

    def derivative(self, s) -> np.ndarray:
        if self.kind == "quadratic":
            return quadratic_derivative(s, self.s0)
        return cup_derivative(s, self.a, self.b, self.gamma, self.s0)

    def second_derivative(self, s) -> np.ndarray:
        """psi''(s), at ``|s - s0| >= clip`` for the family (the Hessian the solver's saddle test uses)."""
        if self.kind == "quadratic":
            return np.ones_like(np.asarray(s, dtype=float))
        return cup_second_derivative(s, self.a, self.b, self.gamma, self.s0, self.clip)

    def weight(self, s) -> np.ndarray:
        """IRLS weight psi'(s) / (s - s0), clipped at |s - s0| >= clip (1 for the quadratic)."""
        if self.kind == "quadratic":
            return np.ones_like(np.asarray(s, dtype=float))
        return irls_weight(s, self.derivative, self.s0, self.clip)

    @property
    def start_weight(self) -> float:
        """Curvature kappa of the quadratic ``kappa (s - s0)^2 / 2`` a fit starts from: 1 for the quadratic;
        for the family the secant through psi(s0 +- b) = a/2, ``|a| / b^2`` (finite for every gamma, positive also
        for the inverted cup)."""
        return 1.0 if self.kind == "quadratic" else abs(self.a) / self.b ** 2

    @property
    def is_cusp(self) -> bool:
        """psi' unbounded at s0: the family with gamma < 1."""
        return self.kind == "family" and self.gamma < 1

    def scaled(self, slope_factor: float, energy_factor: float = 1.0) -> "PriorPotential":
        """The same potential for omega measured in units ``slope_factor`` times larger (b, s0, clip scale with it)
        and with its height a times ``energy_factor``."""
        return PriorPotential(self.name, self.kind, self.a * energy_factor, self.b * slope_factor, self.gamma,
                              self.s0 * slope_factor, self.clip * slope_factor)


def prior_potential(name: str = "quadratic", **params) -> PriorPotential:
    """A named prior potential (:data:`POTENTIAL_PRESETS`), its parameters overridden by ``params`` (``a``, ``b``,
    ``gamma``, ``s0``, ``clip``; the quadratic takes ``s0`` only).  ``clip`` defaults to 1e-6 b."""
    if name not in POTENTIAL_PRESETS:
        raise ValueError(f"unknown prior potential {name!r}; use one of {tuple(POTENTIAL_PRESETS)}")
    allowed = ("s0",) if name == "quadratic" else ("a", "b", "gamma", "s0", "clip")
    extra = sorted(set(params) - set(allowed))
    if extra:
        raise ValueError(f"the {name!r} potential takes {allowed}, not {extra}; remove them")
    s0 = float(params.get("s0", 0.0))
    if not np.isfinite(s0):
        raise ValueError(f"potential s0 must be a finite number (the centre of psi, in units of W h), got {s0!r}")
    if name == "quadratic":
        return PriorPotential(name, "quadratic", s0=s0)
    p = {**POTENTIAL_PRESETS[name], **{k: float(v) for k, v in params.items()}}
    _check_family(p["a"], p["b"], p["gamma"])
    clip = p.get("clip", CLIP * p["b"])
    if not (np.isfinite(clip) and clip > 0):
        raise ValueError(f"potential clip must be > 0 (IRLS weights are taken at |s - s0| >= clip), got {clip!r}")
    return PriorPotential(name, "family", p["a"], p["b"], p["gamma"], s0, clip)


# ----------------------------------------------------------------------------------------- robust data terms
def gaussian_error(e, sigma: float = 1.0) -> np.ndarray:
    """rho(e) = e^2 / (2 sigma^2)."""
    return 0.5 * (np.asarray(e, dtype=float) / sigma) ** 2


def gaussian_error_derivative(e, sigma: float = 1.0) -> np.ndarray:
    return np.asarray(e, dtype=float) / sigma ** 2


def mixture_means(kind: str, mu: float) -> np.ndarray:
    """The means of the mixtures of Fig. 5: ``+-mu`` (``mixture2``) or ``k mu, k = -5..5`` (``mixture11``)."""
    return mu * (np.array([-1.0, 1.0]) if kind == "mixture2" else np.arange(-5.0, 6.0))


def mixture_error(e, means, sigma: float = 1.0) -> np.ndarray:
    """rho(e) = -ln sum_k (1/m) exp(-(e - m_k)^2 / (2 sigma^2)) + c, with c such that rho(0) = 0: the negative log of
    an equal-weight mixture of equal-variance Gaussians (log-sum-exp, no underflow at large |e|)."""
    e = np.asarray(e, dtype=float)
    m = np.asarray(means, dtype=float)

    def neg_log(x):
        return -logsumexp(-0.5 * ((x[..., None] - m) / sigma) ** 2, axis=-1)

    return neg_log(e) - neg_log(np.zeros(1))[0]


def mixture_error_derivative(e, means, sigma: float = 1.0) -> np.ndarray:
    """rho'(e) = sum_k r_k (e - m_k) / sigma^2 with the responsibilities r_k of the components."""
    e = np.asarray(e, dtype=float)
    m = np.asarray(means, dtype=float)
    z = -0.5 * ((e[..., None] - m) / sigma) ** 2
    r = np.exp(z - logsumexp(z, axis=-1, keepdims=True))
    return np.sum(r * (e[..., None] - m), axis=-1) / sigma ** 2


def insensitive_error(e, eps: float = 1.0, sigma: float = 1.0) -> np.ndarray:
    """rho(e) = |e|_eps / sigma = max(|e| - eps, 0) / sigma, Vapnik's epsilon-insensitive error."""
    return np.maximum(np.abs(np.asarray(e, dtype=float)) - eps, 0.0) / sigma


def insensitive_error_derivative(e, eps: float = 1.0, sigma: float = 1.0) -> np.ndarray:
    """sgn(e) / sigma outside the tube |e| > eps, 0 inside (and on its edge)."""
    e = np.asarray(e, dtype=float)
    return np.where(np.abs(e) > eps, np.sign(e) / sigma, 0.0)


@dataclass(frozen=True)
class DataTerm:
    """A data term rho of the residual e = h(x_i) - y_i (:data:`DATA_TERMS`); build it with :func:`data_term`."""

    name: str
    sigma: float = 1.0
    mu: float = 1.0
    eps: float = 1.0
    clip: float = CLIP

    def value(self, e) -> np.ndarray:
        if self.name == "gaussian":
            return gaussian_error(e, self.sigma)
        if self.name == "insensitive":
            return insensitive_error(e, self.eps, self.sigma)
        return mixture_error(e, mixture_means(self.name, self.mu), self.sigma)

    def derivative(self, e) -> np.ndarray:
        if self.name == "gaussian":
            return gaussian_error_derivative(e, self.sigma)
        if self.name == "insensitive":
            return insensitive_error_derivative(e, self.eps, self.sigma)
        return mixture_error_derivative(e, mixture_means(self.name, self.mu), self.sigma)

    def second_derivative(self, e) -> np.ndarray:
        """rho''(e): 1/sigma^2 (Gaussian), ``(1 - Var_r(m) / sigma^2) / sigma^2`` with the variance of the means under
        the responsibilities (mixtures), 0 (insensitive, off its kinks)."""
        e = np.asarray(e, dtype=float)
        if self.name == "gaussian":
            return np.full_like(e, 1.0 / self.sigma ** 2)
        if self.name == "insensitive":
            return np.zeros_like(e)
        m = mixture_means(self.name, self.mu)
        z = -0.5 * ((e[..., None] - m) / self.sigma) ** 2
        r = np.exp(z - logsumexp(z, axis=-1, keepdims=True))
        mean = np.sum(r * m, axis=-1)
        var = np.sum(r * (m - mean[..., None]) ** 2, axis=-1)
        return (1.0 - var / self.sigma ** 2) / self.sigma ** 2

    def weight(self, e) -> np.ndarray:
        """IRLS weight rho'(e) / e, clipped at |e| >= clip (1/sigma^2 for the Gaussian).  It is 0 inside the
        epsilon tube and can be negative for a mixture near e = 0 when mu > sigma (the solver floors it)."""
        if self.name == "gaussian":
            return np.full_like(np.asarray(e, dtype=float), 1.0 / self.sigma ** 2)
        return irls_weight(e, self.derivative, 0.0, self.clip)

    @property
    def start_weight(self) -> float:
        """Weight 1/sigma^2 of the Gaussian data term a fit starts from."""
        return 1.0 / self.sigma ** 2

    def scaled(self, y_factor: float) -> "DataTerm":
        """The same data term for y measured in units ``y_factor`` times larger (sigma, mu, eps, clip scale)."""
        return DataTerm(self.name, self.sigma * y_factor, self.mu * y_factor, self.eps * y_factor,
                        self.clip * y_factor)


def data_term(name: str = "gaussian", **params) -> DataTerm:
    """A data term by name (:data:`DATA_TERMS`) with its parameters: ``sigma`` (all, default 1), ``mu``
    (mixtures: the means are +-mu or k mu, default 1), ``eps`` (``insensitive``: the half-width of the tube, default
    1), and ``clip`` (default 1e-6 sigma), all in y units."""
    if name not in DATA_TERMS:
        raise ValueError(f"unknown data term {name!r}; use one of {tuple(DATA_TERMS)}")
    allowed = DATA_TERMS[name] + ("clip",)
    extra = sorted(set(params) - set(allowed))
    if extra:
        raise ValueError(f"the {name!r} data term takes {allowed}, not {extra}; remove them")
    p = {"sigma": 1.0, "mu": 1.0, "eps": 1.0, **{k: float(v) for k, v in params.items()}}
    if not (np.isfinite(p["sigma"]) and p["sigma"] > 0):
        raise ValueError(f"data term sigma must be > 0 (the noise scale in y units), got {p['sigma']!r}")
    if not (np.isfinite(p["mu"]) and p["mu"] >= 0):
        raise ValueError(f"data term mu must be >= 0 (the spacing of the mixture's means in y units), got {p['mu']!r}")
    if not (np.isfinite(p["eps"]) and p["eps"] >= 0):
        raise ValueError(f"data term eps must be >= 0 (the half-width of the insensitive tube in y units), "
                         f"got {p['eps']!r}")
    clip = p.get("clip", CLIP * p["sigma"])
    if not (np.isfinite(clip) and clip > 0):
        raise ValueError(f"data term clip must be > 0 (IRLS weights are taken at |e| >= clip), got {clip!r}")
    return DataTerm(name, p["sigma"], p["mu"], p["eps"], clip)


# ------------------------------------------------------------------------------------------- small figures
#: What the panels of Figs 5 and 12 are called (the keys of :data:`DATA_TERMS` and :data:`POTENTIAL_PRESETS`).
FIGURE_TITLES = {"mixture2": "-ln of a mixture of 2 Gaussians (means ±1)",
                 "mixture11": "-ln of a mixture of 11 Gaussians (means -5..5)",
                 "insensitive": "ε-insensitive error, ε = 1",
                 "cusp": "cusp: a = 5, b = 10, γ = 0.7", "cup": "cup: a = 1, b = 3, γ = 2",
                 "inverted_cup": "inverted cup: a = -4.8, b = 15, γ = 2"}


def fig5_document(n: int = 201) -> dict:
    """The three robust error functions of Fig. 5 on e in [-6, 6] (sigma = 1, means +-1 and -5..5, eps = 1; the
    paper gives no parameters), as JSON-ready lists: ``{"figure": "fig5", "panels": [{"name", "e", "E", "title",
    "xlabel", "ylabel", "curves"}]}`` (``curves``: the same E(e), as the small figures' curve drawer takes it,
    :mod:`bftcore.studies.small_figures`)."""
    e = np.linspace(-6.0, 6.0, n)
    panels = [(name, np.asarray(data_term(name).value(e), dtype=float)) for name in
              ("mixture2", "mixture11", "insensitive")]
    return {"figure": "fig5",
            "panels": [{"name": name, "e": e.tolist(), "E": E.tolist(), "title": FIGURE_TITLES[name],
                        "xlabel": "e (residual / σ)", "ylabel": "E(e)",
                        "curves": [{"label": "E(e)", "x": e.tolist(), "y": E.tolist()}]} for name, E in panels]}


def fig12_document(n: int = 201) -> dict:
    """The potentials of Fig. 12 on s in [-50, 50] (s0 = 0) and their derivatives: ``{"figure": "fig12",
    "panels": [{"name", "a", "b", "gamma", "s", "psi", "dpsi", "cusp", "title", "xlabel", "ylabel", "curves"}]}``,
    in the caption's order (a) cusp, (b) cup, (c) inverted cup; ``cusp`` is gamma < 1 (the caption puts the word on
    panel (b), whose gamma = 2 is smooth)."""
    s = np.linspace(-50.0, 50.0, n)
    out = []
    for name in ("cusp", "cup", "inverted_cup"):
        p = prior_potential(name)
        psi, dpsi = p.value(s).tolist(), p.derivative(s).tolist()
        out.append({"name": name, "a": p.a, "b": p.b, "gamma": p.gamma, "s": s.tolist(), "psi": psi,
                    "dpsi": dpsi, "cusp": bool(p.is_cusp), "title": FIGURE_TITLES[name], "xlabel": "s",
                    "ylabel": "ψ(s), ψ′(s)",
                    "curves": [{"label": "ψ(s)", "x": s.tolist(), "y": psi},
                               {"label": "ψ′(s)", "x": s.tolist(), "y": dpsi}]})
    return {"figure": "fig12", "panels": out}
