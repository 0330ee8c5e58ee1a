"""Workflows over many fits: beta sweeps with continuation and bifurcations, basins of the local minima of a
mixture of Gaussian prior factors, and their documents (CONVENTIONS.md §4).

The layer above the problems (:mod:`bftcore.models.density`, :mod:`bftcore.models.regression`) and below the façade
(:mod:`bftcore.api`): a workflow drives a ``solve(beta, init) -> (field, summary)`` function of a problem many
times, warm-starting from fields (arrays) and comparing solutions by their summaries (energy, mixing, test
error, stability).  The formulas it rests on (a_j, the mixture energy, the reduced fixed point, plateaus) live in
:mod:`bftcore.foundations.mixing`.  Independent solves (the starts of basins, the down branches of a sweep) can run side
by side on the engines of :mod:`bftcore.foundations.distributed`; learning curves and bootstraps live in
:mod:`bftcore.studies.learning`.
"""
from __future__ import annotations

import time

import numpy as np

from ..foundations.config import ConfigError, checked, kind_of
from ..foundations.distributed import parse_scheduler, run_tasks
from ..foundations.limits import blas_threads
from ..foundations.mixing import check_beta, fig7_config, zero_dimensional_model
from ..models.regression import RegressionModel


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


def beta_sweep(solve, betas, init=None, starts=(), count_stable=None, jump_tol=0.2, tol=1e-4,
               continue_all=None) -> dict:
    """beta sweep with continuation: up from ``init`` at the smallest beta, then down from every distinct
    stable solution found at the largest beta (the end of the up branch and the solves from ``starts``, a list
    of ``(name, init)``).

    Hysteresis shows as an up and a down branch that differ over a beta interval.  Bifurcations are the betas
    where the number of stable solutions changes: from ``count_stable(beta)`` when the model can count its
    solutions (regression: all roots of (43) [001]), refined by bisection to ``tol``; otherwise the folds where
    a branch jumps (a change of some a_j by more than ``jump_tol`` between neighbouring betas that survives
    bisection of the interval down to ``tol``).

    ``continue_all(betas, inits) -> [branch, ...]``, when given, follows the down branches (independent of each
    other) instead of one :func:`continuation` after another: :func:`sweep_document` passes one that runs them on
    the engine of :mod:`bftcore.foundations.distributed`.
    """
    betas = np.unique([check_beta(b) for b in np.ravel(betas)])
    if betas.size < 2:
        raise ValueError("a beta sweep needs at least two distinct betas")
    up = continuation(solve, betas, init, "up")
    tops = [(up["_fields"][-1], {"energy": up["energy"][-1], "mixing": up["mixing"][-1],
                                 "stable": up["stable"][-1]})]
    for _, s in starts:
        f, r = solve(float(betas[-1]), s)
        if r.get("stable", True) and not any(_same_solution(r, t) for _, t in tops):
            tops.append((f, r))
    branches = [up]
    if continue_all is not None:
        branches += continue_all(betas[::-1], [f for f, _ in tops])
    else:
        branches += [continuation(solve, betas[::-1], f, "down") for f, _ in tops]
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
            for jump in np.flatnonzero(np.max(np.abs(np.diff(mix, axis=0)), axis=1) > jump_tol):
                b = _refine_jump(solve, br, int(jump), jump_tol, tol)
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
    return distinct_minima([(name, solve(float(beta), init)[1]) for name, init in starts])


def distinct_minima(solved) -> list[dict]:
    """The distinct solutions among ``(start name, summary)`` pairs, lowest energy first."""
    minima: list[dict] = []
    for name, r in solved:
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


# ----------------------------------------------------------------------------------------------------------------
# model adapters and the documents of CONVENTIONS.md §4
# ----------------------------------------------------------------------------------------------------------------
def regression_solver(model):
    """``solve(beta, init)`` for a :class:`bftcore.models.regression.RegressionModel` (the reduced route, (42)-(43)).
    ``init`` may be None (the complete average (41)), a field h, or an init name (``"template:0"``, ...)."""
    def solve(beta, init):
        if isinstance(init, str):
            init = model.initial_field(init)
        return model.solve_reduced(beta, init)
    return solve


def density_solver(config: dict):
    """``solve(beta, init)`` for a density config (field: L or P, as prior.field): the solver's field at the end
    and the fit's summary (:meth:`bftcore.models.density.DensityFit.summary`).  ``init`` may be None (the config's
    solver.init), an init name such as ``"template:0"``, or a field.  Each summary carries ``"stable"``: the
    smallest eigenvalue of the Hessian (160) at the solution, zero modes projected out, is >= 0
    (:func:`bftcore.models.density.is_local_minimum`)."""
    def solve(beta, init):
        cfg = {**config, "beta": float(beta)}
        if isinstance(init, str):
            cfg["solver"] = {**(config.get("solver") or {}), "init": init}
            init = None
        valid = checked(cfg)
        fit = kind_of(valid).solve(valid, init, check_stability=True)
        return fit.field, fit.summary()
    return solve


def _regression_starts(config: dict):
    model = RegressionModel.from_config(config)
    rng = np.random.default_rng(0)
    starts = [(f"template:{j}", f"template:{j}") for j in range(model.m)]
    starts += [("uniform", "uniform"), ("kernel", "kernel"), ("average", "average")]
    starts += [(f"random:{k}", rng.dirichlet(np.ones(model.m)) @ model.templates) for k in range(3)]
    up_init = (config.get("solver") or {}).get("init", "kernel")
    return regression_solver(model), starts, model.reduced.count_stable, up_init


def _density_starts(config: dict):
    n_t = len(config.get("templates") or [])
    starts = [(f"template:{j}", f"template:{j}") for j in range(n_t)]
    starts += [("uniform", "uniform"), ("kernel", "kernel"), ("empirical", "empirical")]
    return density_solver(config), starts, None, None


#: The sweep's solver and starting fields, per problem kind (:mod:`bftcore.models.problems`).
STARTS = {"density": _density_starts, "density_1d": _density_starts, "regression": _regression_starts}


def _model_and_starts(config: dict):
    """(solve, starts, count_stable, up_init) for a config of any kind."""
    valid = checked(config)
    kind = kind_of(valid)
    if kind.name not in STARTS:
        raise ConfigError(f"a beta sweep or a basin search is not defined for a {kind.name.replace('_', ' ')} "
                          f"document: they follow a global mixture of templates under a Gaussian prior; fit it "
                          f"instead (for a local prior: fit it at each beta, or remove prior.local/cuts)")
    return STARTS[kind.name](valid)


SPACINGS = ("linear", "log")


def beta_grid(beta_min: float, beta_max: float, n: int, spacing: str = "linear") -> np.ndarray:
    """n betas from beta_min to beta_max, evenly spaced (``"linear"``) or evenly spaced in ln beta (``"log"``: the
    right sampling on the log axis the dashboard draws, where a fold at small beta otherwise sits between two
    samples)."""
    if spacing not in SPACINGS:
        raise ValueError(f"unknown beta spacing {spacing!r}; use one of {SPACINGS}")
    if spacing == "log":
        return np.geomspace(beta_min, beta_max, int(n))
    return np.linspace(beta_min, beta_max, int(n))


def solve_task(task: dict):
    """One solve of a config at ``task["beta"]`` from ``task["init"]`` (a Dask task: module-level, plain values):
    ``(field, summary)``."""
    solve, _, _, _ = _model_and_starts(task["config"])
    return solve(float(task["beta"]), task["init"])


def continuation_task(task: dict) -> dict:
    """One down branch of a sweep (a Dask task): :func:`continuation` through ``task["betas"]``."""
    solve, _, _, _ = _model_and_starts(task["config"])
    return continuation(solve, task["betas"], task["init"], "down")


def sweep_document(config: dict, beta_min: float, beta_max: float, n: int, spacing: str = "linear",
                   progress=None, scheduler: str | None = "serial") -> dict:
    """Sweep document (CONVENTIONS.md §4): ``branches`` (up, then down from each distinct stable solution at
    beta_max) and ``bifurcations``, for n betas from beta_min to beta_max spaced as ``spacing`` says
    (:func:`beta_grid`; the document's ``"spacing"``).  ``progress(solves, beta)``, when given, is called after
    every solve (a sweep of n betas takes about (1 + branches) n solves plus the bisections).

    ``scheduler`` (:mod:`bftcore.foundations.distributed`): ``"serial"`` (the default: one branch after another in this
    process) or an engine that follows the down branches side by side (``"local:N"``, an address, ``"inprocess"``);
    the document is the same, and ``progress`` then hears of the down branches' solves only as each branch ends."""
    if not (check_beta(beta_min) < check_beta(beta_max)) or int(n) < 2:
        raise ValueError(f"need 0 < beta_min < beta_max and n >= 2, got {beta_min}, {beta_max}, {n}")
    betas = beta_grid(beta_min, beta_max, n, spacing)
    t0 = time.perf_counter()
    solve, starts, count_stable, up_init = _model_and_starts(config)
    if progress is not None:
        solve = _reporting(solve, progress)
    blas_threads()
    continue_all = None
    if parse_scheduler(scheduler)[0] != "serial":  # None is the plain loop too (run_tasks' default)
        def continue_all(down_betas, inits):
            tasks = [{"config": config, "betas": down_betas, "init": f} for f in inits]
            return run_tasks(continuation_task, tasks, scheduler,
                             on_result=None if progress is None else
                             lambda i, br: progress(len(br["beta"]), float(br["beta"][-1])))
    doc = beta_sweep(solve, betas, init=up_init, starts=starts, count_stable=count_stable, continue_all=continue_all)
    doc.update({"model": config.get("model", "density"), "beta_min": float(beta_min), "beta_max": float(beta_max),
                "n": int(n), "spacing": spacing, "elapsed_s": time.perf_counter() - t0})
    return doc


def _reporting(solve, progress):
    """``solve`` that calls ``progress(solves so far, beta)`` after each solve."""
    done = [0]

    def reported(beta, init):
        out = solve(beta, init)
        done[0] += 1
        progress(done[0], float(beta))
        return out
    return reported


def basins_document(config: dict, scheduler: str | None = "serial") -> dict:
    """Basins document (CONVENTIONS.md §4): the distinct local minima at the config's beta reached from each
    template, uniform, kernel (and, for regression, the average and three random template mixtures).  The starts
    are independent solves: ``scheduler`` (:mod:`bftcore.foundations.distributed`; default ``"serial"``, a loop here, as
    a handful of solves would wait longer for Dask to start) runs them side by side, with the same document."""
    t0 = time.perf_counter()
    beta = check_beta(config.get("beta", 1.0))
    solve, starts, _, _ = _model_and_starts(config)
    blas_threads()
    if parse_scheduler(scheduler)[0] == "serial":
        minima = find_basins(solve, starts, beta)
    else:
        solved = run_tasks(solve_task, [{"config": config, "beta": beta, "init": init} for _, init in starts],
                           scheduler)
        minima = distinct_minima([(name, r) for (name, _), (_, r) in zip(starts, solved)])
    return {"model": config.get("model", "density"), "beta": beta, "starts": [s for s, _ in starts],
            "minima": minima, "elapsed_s": time.perf_counter() - t0}


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
