"""Bayesian Ying-Yang (BYY) harmony learning of a 1-D Gaussian mixture (seed 004, L. Xu's appendix, eqs. (9)-(12)),
and maximum likelihood (ML) from the same start as its baseline.

The i.i.d. mixture of (10)-(12) with no factor layer (y absent, m_l = 0), no data-smoothing prior (h = 0) and a free
Theta = (softmax logits a_l of the weights alpha_l, means mu_l, log widths s_l = ln sigma_l)::

    L_lt   = ln alpha_l + ln G(x_t | mu_l, sigma_l^2)                    (12): ln[q(x|l) alpha_l]
    p(l|x_t) = e^{L_lt} / sum_j e^{L_jt}                                 Yang designed from Ying, gamma = 1 (eq. (1))
    H(Theta) = (1/N) sum_t sum_l p(l|x_t) L_lt                           harmony, (10) divided by N
    grad H   = (1/N) sum_t sum_l p_lt (1 + dh_lt) grad L_lt,  dh_lt = L_lt - sum_j p_jt L_jt        (9)

The term ``dh_lt`` is what makes harmony prune: where a component fits x_t worse than the average (dh < -1) its
update is reversed, it is pushed away from x_t (de-learning: rival penalised competitive learning), and the weight of
a component that only rivals others shrinks to zero.  ML maximises ``(1/N) sum_t ln sum_l e^{L_lt}``, whose gradient
is (9) without the ``dh`` term: every component is only ever pulled towards its data, and redundant components share
a cluster instead of leaving it.

Relation to Lemm's Bayesian field theory (the seed does not mention Lemm; this is our reading):

* Lemm's mixing coefficients a_j of a prior mixture (eq. (546); 001 eq. (23)) are Laplace responsibilities,
  a_j ∝ p_j e^{-beta E_j} times the 1/2 ln det K_j "volume" term: the same form as BYY's p(l|x) of (12),
  ∝ e^{L_l} (2 pi)^{m/2} |Pi_l|^{-1/2}.  Here (m = 0) they are the plain posterior responsibilities.
* BYY's tempering p = q^gamma (eq. (1)) and Lemm's inverse temperature beta are the same knob: gamma, beta -> infinity
  is the hard cut (winner take all, Lemm's (553)); beta -> 0 gives Lemm's h-independent a_j^0 (548).
* Lemm's mixture energy is ``-ln sum_j e^{-E_j} = min_a [sum_j a_j E_j - H(a)]``: an energy *minus an entropy*
  H(a) = -sum a_j ln a_j of the responsibilities; with E_j = -L_j it is the negative log-likelihood, and ML keeps
  the entropy.  Harmony maximises ``sum_l p_l L_l`` with the same p but *without* the entropy term.  The entropy rewards
  spreading responsibility over components, so ML (and Lemm's soft mixture) keeps every component; without it, the
  responsibilities prefer to be sharp, weights of components that only share data go to zero, and harmony prunes.

The appendix is a draft with typos (the digest's errata): (10) is printed three times and (9) twice, with different
contents; we use the i.i.d. form of its "Derivations" section with (12), and the first (9) (the Laplace form, with
dh), both with m_l = 0 and no R_l.  "The Yang step and
Yang step" of its Fig. 3 is the Yang step (p(l|x)) and the Ying step (Theta); q(h_z|X_N) is q(h_z|Z_N).

Decisions (the appendix gives no algorithm for this case, nor numbers):

* Both objectives are maximised by the same quasi-Newton method (scipy's L-BFGS-B, whose line search keeps every
  accepted step non-decreasing) on (a, mu, s), after standardising the data by their mean and standard deviation:
  the fit is then equivariant under y -> c y + d (means c mu + d, widths |c| sigma, the same weights).
  :func:`gradient_flow` is the plain flow of (9) with a backtracking step, the second route the tests use.
* A component whose weight falls below ``prune`` (default 0.05, the digest's) is removed and the optimiser restarted
  on the rest; the weights history keeps its place (weight 0 from then on).  The flow alone stops in local maxima
  that split a cluster between sharp components, so the converged fit then tries deleting one component and keeps
  the deletion when the objective rises (harmony's model selection by the larger H; the same rule for ML, where a
  deletion almost never raises the likelihood).  "Kept components" are those with weight > 0.05
  (:data:`KEEP`).
* Start: k components at the (l - 1/2)/k quantiles of the data, sigma = s.d./2, equal weights (the seed's digest).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax

__all__ = ["Mixture", "MixtureFit", "log_components", "responsibilities", "harmony", "log_likelihood",
           "objective_and_gradient", "quantile_start", "fit_mixture", "gradient_flow", "kept", "KEEP", "PRUNE",
           "OBJECTIVES"]

#: A component counts as kept when its weight is above this (the issue's count).
KEEP = 0.05
#: Default pruning threshold: below it a component is removed from the fit.
PRUNE = 0.05
OBJECTIVES = ("harmony", "ml")
_LOG_2PI = float(np.log(2 * np.pi))


@dataclass(frozen=True)
class Mixture:
    """A 1-D Gaussian mixture: ``weights`` alpha_l (sum 1), ``means`` mu_l, ``widths`` sigma_l (> 0)."""
    weights: np.ndarray
    means: np.ndarray
    widths: np.ndarray

    def log_density(self, x) -> np.ndarray:
        """ln sum_l alpha_l G(x | mu_l, sigma_l^2) at every x."""
        return logsumexp(log_components(self, np.asarray(x, dtype=float)), axis=0)

    def density(self, x) -> np.ndarray:
        return np.exp(self.log_density(x))

    def to_dict(self) -> dict:
        return {"weights": self.weights.tolist(), "means": self.means.tolist(), "widths": self.widths.tolist()}


@dataclass
class MixtureFit:
    """The fitted mixture (pruned components removed), the objective per iteration, and the weights per iteration
    of every starting component (0 once pruned); ``stages`` indexes where each optimiser run starts in the history."""
    objective: str
    mixture: Mixture
    history: list[float] = field(default_factory=list)
    weights_history: list[np.ndarray] = field(default_factory=list)
    stages: list[int] = field(default_factory=list)

    @property
    def kept(self) -> int:
        return kept(self.mixture)


def kept(mixture: Mixture, threshold: float = KEEP) -> int:
    """The number of components whose weight is above ``threshold``."""
    return int(np.sum(mixture.weights > threshold))


def log_components(mixture: Mixture, x: np.ndarray) -> np.ndarray:
    """L_lt = ln alpha_l + ln G(x_t | mu_l, sigma_l^2), eq. (12) with m_l = 0 (rows: components)."""
    w, mu, sd = (np.asarray(v, dtype=float) for v in (mixture.weights, mixture.means, mixture.widths))
    with np.errstate(divide="ignore"):
        return (np.log(w)[:, None] - np.log(sd)[:, None] - 0.5 * _LOG_2PI
                - 0.5 * ((x[None, :] - mu[:, None]) / sd[:, None]) ** 2)


def responsibilities(mixture: Mixture, x) -> np.ndarray:
    """p(l | x_t) of (12), Yang designed from Ying with gamma = 1."""
    return softmax(log_components(mixture, np.asarray(x, dtype=float)), axis=0)


def harmony(mixture: Mixture, x) -> float:
    """H(Theta) = (1/N) sum_t sum_l p(l|x_t) L_lt, eqs. (10)-(12) divided by N."""
    L = log_components(mixture, np.asarray(x, dtype=float))
    p = softmax(L, axis=0)
    return float(np.sum(np.where(p > 0, p * L, 0.0)) / L.shape[1])


def log_likelihood(mixture: Mixture, x) -> float:
    """(1/N) sum_t ln sum_l e^{L_lt}: the ML objective (minus Lemm's mixture energy, averaged)."""
    return float(np.mean(mixture.log_density(x)))


def _unpack(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = theta.size // 3
    return theta[:k], theta[k:2 * k], theta[2 * k:]


def _mixture(theta: np.ndarray) -> Mixture:
    a, mu, s = _unpack(theta)
    return Mixture(softmax(a), mu.copy(), np.exp(s))


def objective_and_gradient(objective: str, theta: np.ndarray, x: np.ndarray) -> tuple[float, np.ndarray]:
    """The objective (``"harmony"``: H; ``"ml"``: the mean log-likelihood) at theta = (logits, means, log widths)
    and its gradient: (9), sum_t sum_l p_lt (1 + dh_lt) grad L_lt / N for harmony, without dh for ML."""
    a, mu, s = _unpack(theta)
    log_alpha = a - logsumexp(a)
    alpha = np.exp(log_alpha)
    z = (x[None, :] - mu[:, None]) * np.exp(-s)[:, None]
    L = log_alpha[:, None] - s[:, None] - 0.5 * _LOG_2PI - 0.5 * z ** 2
    p = softmax(L, axis=0)
    n = x.size
    if objective == "harmony":
        value = float(np.sum(p * L) / n)
        w = p * (1.0 + L - np.sum(p * L, axis=0, keepdims=True))    # p (1 + dh), eq. (9)
    elif objective == "ml":
        value = float(np.mean(logsumexp(L, axis=0)))
        w = p
    else:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    # dL_lt/da_m = delta_lm - alpha_m; dL_lt/dmu_l = z / sigma; dL_lt/ds_l = z^2 - 1
    g_a = (w.sum(axis=1) - alpha * w.sum()) / n
    g_mu = np.sum(w * z, axis=1) * np.exp(-s) / n
    g_s = np.sum(w * (z ** 2 - 1.0), axis=1) / n
    return value, np.concatenate([g_a, g_mu, g_s])


def quantile_start(x, k: int) -> Mixture:
    """k components at the (l - 1/2)/k quantiles, sigma = s.d./2, equal weights."""
    x = _checked_data(x)
    if not (isinstance(k, (int, np.integer)) and k >= 1):
        raise ValueError(f"the number of starting components must be an integer >= 1, not {k!r}")
    return Mixture(np.full(k, 1.0 / k), np.quantile(x, (np.arange(k) + 0.5) / k), np.full(k, np.std(x) / 2))


def _checked_data(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"the data must be one-dimensional samples y_t; got an array of shape {x.shape}")
    if x.size < 2 or not np.all(np.isfinite(x)):
        raise ValueError(f"the mixture needs at least 2 finite samples; got {x.size} "
                         f"({int(np.sum(~np.isfinite(x)))} not finite)")
    if np.std(x) == 0:
        raise ValueError("all samples are equal: a mixture has no width to fit; add samples that differ")
    return x


def _standardise(x: np.ndarray, start: Mixture) -> tuple[np.ndarray, float, float, np.ndarray]:
    centre, scale = float(np.mean(x)), float(np.std(x))
    theta = np.concatenate([np.log(start.weights), (start.means - centre) / scale, np.log(start.widths / scale)])
    return (x - centre) / scale, centre, scale, theta


def _back(theta: np.ndarray, centre: float, scale: float) -> Mixture:
    m = _mixture(theta)
    return Mixture(m.weights, centre + scale * m.means, scale * m.widths)


def _run(objective: str, z: np.ndarray, theta: np.ndarray, alive: np.ndarray, k0: int, out: MixtureFit,
         shift: float, prune: float, max_iter: int, gtol: float) -> tuple[np.ndarray, np.ndarray]:
    """One optimiser stage and the threshold pruning after it, repeated until no weight falls below ``prune``:
    (theta, alive) of the result (``alive``: the indices among the k0 starting components), every iterate appended
    to ``out``'s histories."""
    def neg(th: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = objective_and_gradient(objective, th, z)
        return -value, -grad

    def record(th: np.ndarray) -> None:
        value = objective_and_gradient(objective, th, z)[0]
        w = np.zeros(k0)
        w[alive] = softmax(_unpack(th)[0])
        out.history.append(value + shift)
        out.weights_history.append(w)

    while True:
        out.stages.append(len(out.history))
        record(theta)
        res = minimize(neg, theta, jac=True, method="L-BFGS-B", callback=record,
                       options={"maxiter": max_iter, "gtol": gtol, "ftol": 1e-12})
        theta = res.x
        a, mu, s = _unpack(theta)
        keep = softmax(a) >= prune
        if keep.all() or not keep.any():
            return theta, alive
        alive = alive[keep]
        theta = np.concatenate([a[keep], mu[keep], s[keep]])


def fit_mixture(x, objective: str = "harmony", start: Mixture | None = None, k: int = 6, prune: float = PRUNE,
                select: bool = True, max_iter: int = 300, gtol: float = 1e-7) -> MixtureFit:
    """Maximise harmony (``"harmony"``) or the log-likelihood (``"ml"``) by L-BFGS on (logits, means, log widths)
    from ``start`` (default :func:`quantile_start` with k components).

    After each optimiser run, components whose weight fell below ``prune`` are removed and the run restarted on the
    rest.  With ``select``, the converged fit then tries to delete one component more (lightest first), refits, and
    keeps the deletion when it raises the objective: harmony's own model selection (the larger H wins), the same
    rule for ML.  Why: the flow of (9) alone stops in local maxima that split a cluster between two sharp components
    (seed 0 of the demo keeps 6 at H = -2.580, where 3 reach H = -2.54)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if not 0 <= prune < 1:
        raise ValueError(f"the pruning threshold must be in [0, 1), not {prune!r}")
    x = _checked_data(x)
    start = quantile_start(x, k) if start is None else start
    z, centre, scale, theta = _standardise(x, start)
    shift = -float(np.log(scale))    # L_lt in the data's units: ln G shifts by -ln(scale)
    out = MixtureFit(objective, start)
    k0 = start.weights.size
    theta, alive = _run(objective, z, theta, np.arange(k0), k0, out, shift, prune, max_iter, gtol)
    best = out.history[-1]
    while select and alive.size > 1:
        a, mu, s = _unpack(theta)
        for j in np.argsort(a):
            keep = np.arange(alive.size) != j
            trial = MixtureFit(objective, start)
            th, al = _run(objective, z, np.concatenate([a[keep], mu[keep], s[keep]]), alive[keep], k0, trial, shift,
                          prune, max_iter, gtol)
            if trial.history[-1] > best + 1e-9:
                offset = len(out.history)
                out.stages.extend(offset + i for i in trial.stages)
                out.history.extend(trial.history)
                out.weights_history.extend(trial.weights_history)
                theta, alive, best = th, al, trial.history[-1]
                break
        else:
            break
    out.mixture = _back(theta, centre, scale)
    return out


def gradient_flow(x, objective: str = "harmony", start: Mixture | None = None, k: int = 6, steps: int = 200,
                  step: float = 1.0) -> MixtureFit:
    """The gradient flow of (9) on (logits, means, log widths) of the standardised data, discretised with a
    backtracking step (halved until the objective does not decrease, then tried doubled): no pruning."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    x = _checked_data(x)
    start = quantile_start(x, k) if start is None else start
    z, centre, scale, theta = _standardise(x, start)
    out = MixtureFit(objective, start, stages=[0])
    value, grad = objective_and_gradient(objective, theta, z)
    for _ in range(steps):
        out.history.append(value - np.log(scale))
        out.weights_history.append(softmax(_unpack(theta)[0]))
        h = step
        while h > 1e-12:
            trial = theta + h * grad
            v, g = objective_and_gradient(objective, trial, z)
            if v >= value:
                theta, value, grad = trial, v, g
                step = 2 * h
                break
            h /= 2
        else:
            break
    out.history.append(value - np.log(scale))
    out.weights_history.append(softmax(_unpack(theta)[0]))
    out.mixture = _back(theta, centre, scale)
    return out
