"""Learning curves and bootstrap bands by real resampling (seed 002, Malzahn & Opper): how the error falls as data
grow, and how much the fit would change with another sample of the same size.

Two ways to get data sets of size n:

* **teacher** (the document has a ``truth``): n fresh draws from the true density or function.  Density: x uniform
  over the x nodes, y from the true p(y|x) on the y nodes (eq. (708) for ``"truth": "paper"``, normalised over the
  y nodes, as :func:`bftcore.models.presets.sample_paper_data` draws the 50 points of Figs 20-28).  Regression: x
  uniform over the nodes, y = h_true(x) + N(0, 1/beta) (beta is the model's inverse noise variance, so the model is
  right about the noise).  Train error is the fit's own (density (710); regression mean (h - y)^2/2 over the
  data), test error the fit's own against the truth (density (711); regression mean over the nodes of
  (h - h_true)^2/2).
* **bootstrap** (no truth, or ``mode="bootstrap"``): n draws *with replacement* from the document's N data points
  (n may exceed N).  Train error is the in-bag error (the same formula on the drawn points, repeats counted),
  test error the out-of-bag error on the points never drawn (none left: that resample has no test error), and
  ``all_error`` the error on all N points, the paper's simple bootstrap (18), which is optimistic once n >~ N
  because about N(1 - e^{-n/N}) distinct points are in the bag (``unique_fraction``: measured and the exact
  expectation 1 - (1 - 1/N)^n).

Every data set is fitted at each lambda of a list (warm-started from the previous lambda's field), and optionally
at the lambda that maximises its own evidence (``evidence=True``: the Laplace evidence path for a density, the
exact evidence for a regression), so the curves show the best lambda moving with n (``best_lambda``: per n, the
lambda of the list with the lowest mean test error).  Means and standard deviations are over the resamples that
gave a number; ``failed`` counts those that did not (a fit that raised).

Each (n, resample) pair is one task with its own seed (``SeedSequence([seed, k, r])``), run by
:func:`bftcore.foundations.distributed.run_tasks` in this process, on a local Dask cluster or on a scheduler by address:
the document is the same for every engine.

For a regression with one proper Gaussian prior, :mod:`bftcore.models.replica` adds the replica theory of seed 002 at
the document's lambda as a labelled approximation, to set beside that lambda's simulated curve (``"replica"``: its
``posterior_variance`` beside the curve's, averaged over the nodes (teacher) or over the N data inputs
(bootstrap); its ``test_error`` beside the curve's ``test_error`` (teacher) or ``all_error`` (bootstrap)).
"""
from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..foundations.config import (
    ConfigError,
    Valid,
    check_resampling,
    grid_from_config,
    kind_of,
    validate_config,
    vouched,
)
from ..foundations.distributed import run_tasks
from ..foundations.limits import RunBudgetExceeded
from ..foundations.metrics import regression_function
from ..foundations.templates import paper_true_density
from ..models import density, regression, replica
from ..models.evidence import check_model, evidence_path

#: What a fit that fails may raise (a bug raises something else, and stops the run).
FIT_ERRORS = (ValueError, ArithmeticError, np.linalg.LinAlgError)
#: lambda values of a per-resample Laplace evidence path (density), log-spaced over a factor 100 either side of
#: the document's lambda.
EVIDENCE_POINTS = 13
EVIDENCE_SPAN = 100.0
#: Default factors of the document's lambda compared in a learning curve (the dashboard's button, the CLI without
#: --lambda).
LAMBDA_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
#: Seconds between two partial documents sent to ``update`` (and one when the last task finishes).
UPDATE_SECONDS = 0.25


def parse_sizes(text: str, flag: str = "--n") -> list[int]:
    """``LO:HI:K`` -> up to K distinct integers from LO to HI, evenly spaced in ln n (``LO:HI:K:linear`` evenly
    spaced in n)."""
    parts = str(text).split(":")
    try:
        lo, hi, k = int(parts[0]), int(parts[1]), int(parts[2])
        spacing = parts[3] if len(parts) > 3 else "log"
    except (IndexError, ValueError):
        raise ConfigError(f"{flag} takes LO:HI:K (integers, e.g. 5:200:8), got {text!r}") from None
    if len(parts) > 4 or spacing not in ("log", "linear"):
        raise ConfigError(f"{flag} takes LO:HI:K or LO:HI:K:linear, got {text!r}")
    if not (1 <= lo <= hi) or k < 1:
        raise ConfigError(f"{flag} needs 1 <= LO <= HI and K >= 1, got {text!r}")
    vals = np.geomspace(lo, hi, k) if spacing == "log" else np.linspace(lo, hi, k)
    return sorted({int(round(v)) for v in vals})


def converging_solver(cfg: dict) -> dict:
    """The document with the solver a learning curve uses: a learning curve is about the estimator (the MAP), not
    the iteration, so a field-L density is solved by Newton to convergence (``max_iter`` at least 100) whatever
    the document's method; with early stopping by ``max_iter`` the curves would mix regularisation by lambda
    with regularisation by the iteration count.  Other problems keep their solver (field P: its active set needs
    the document's method); their fits that stop unconverged are counted in ``unconverged``."""
    if not _learning(cfg).newton_to_the_end or cfg["prior"]["field"] != "L":
        return cfg
    solver = {**cfg["solver"], "method": "newton", "max_iter": max(100, int(cfg["solver"]["max_iter"]))}
    return {**cfg, "solver": solver}


def _seed_of(seed: int, k: int, r: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(k), int(r)]))


def _with(cfg: dict, data, lam: float | None = None) -> Valid:
    """The valid document ``cfg`` with other data (drawn from its truth or resampled from its own points) and, if
    given, another lambda (a multiple of its own): vouched for, not checked again (thousands of fits)."""
    out = {**cfg, "data": data}
    if lam is not None:
        out["prior"] = {**cfg["prior"], "lambda": float(lam)}
    return vouched(out)


# --------------------------------------------------------------------------------------------------------------
# drawing data
# --------------------------------------------------------------------------------------------------------------
def truth_sampler(cfg: dict) -> Callable[[int, np.random.Generator], np.ndarray]:
    """``draw(n, rng) -> (n, 2)`` data from the document's truth (module docstring); a ConfigError without one."""
    return _learning(cfg).truth_sampler(cfg)


def _density_truth(cfg: dict) -> Callable[[int, np.random.Generator], np.ndarray]:
    grid = grid_from_config(cfg)
    if cfg.get("truth") is None:
        raise ConfigError("teacher mode draws data from the truth; give \"truth\": \"paper\" or use the "
                          "bootstrap of your data")
    P = paper_true_density(grid)  # the only density truth (as DensityProblem.P_true), without building a problem
    cdf = np.cumsum(P / P.sum(axis=1, keepdims=True), axis=1)

    def draw(n, rng):
        ix = rng.integers(0, grid.x.n, size=n)
        u = rng.random(n)
        iy = np.minimum((cdf[ix] < u[:, None]).sum(axis=1), grid.y.n - 1)
        return np.column_stack([grid.x.nodes[ix], grid.y.nodes[iy]])
    return draw


def _regression_truth(cfg: dict) -> Callable[[int, np.random.Generator], np.ndarray]:
    grid = grid_from_config(cfg)
    model = regression.RegressionModel.from_config(_with(cfg, []))
    if model.truth is None:
        raise ConfigError("teacher mode draws data from the truth; give the true h(x) as \"truth\" or use the "
                          "bootstrap of your data")
    truth, sd = model.truth, 1.0 / np.sqrt(float(cfg["beta"]))

    def draw_regression(n, rng):
        ix = rng.integers(0, grid.x.n, size=n)
        return np.column_stack([grid.x.nodes[ix], truth[ix] + sd * rng.standard_normal(n)])
    return draw_regression


def expected_unique(N: int, m) -> np.ndarray:
    """Expected number of distinct points in m draws with replacement from N: N (1 - (1 - 1/N)^m) (seed 002, after
    eq. (18); about N (1 - e^{-m/N}))."""
    return N * (1.0 - (1.0 - 1.0 / N) ** np.asarray(m, dtype=float))


# --------------------------------------------------------------------------------------------------------------
# one fit and its errors
# --------------------------------------------------------------------------------------------------------------
def _density_errors(cfg, data, lam, init, held_out, everything):
    c = _with(cfg, data.tolist(), lam)
    fit = kind_of(c).solve(c, init)  # the conditional or the 1-D density's kind
    L, grid = fit.L, grid_from_config(c)

    def loss(points):
        if points is None or len(points) == 0:
            return None
        ix, iy = grid.snap(points)
        return float(-np.mean(L[ix, iy]))
    out = {"train": _finite(fit.last.train_error), "test": _finite(fit.last.test_error),
           "converged": bool(fit.last.converged)}
    if held_out is not None:
        out["test"] = loss(held_out)
        out["all"] = loss(everything)
    return fit.field, out, fit


def _regression_errors(cfg, data, lam, init, held_out, everything):
    fit = regression.solve(_with(cfg, data.tolist(), lam), init)
    model, h = fit.model, fit.h
    axis = model.axis

    def loss(points):
        if points is None or len(points) == 0:
            return None
        return float(0.5 * np.mean((h[axis.snap(points[:, 0])] - points[:, 1]) ** 2))
    var = model.exact(fit.energy.beta)["var"]
    out = {"train": _finite(model.train_error(h)), "test": _finite(model.test_error(h)),
           "converged": bool(fit.converged), "posterior_variance": float(np.mean(var))}
    if held_out is not None:  # bootstrap: averaged over the N data inputs, as the replica theory's tr(G)/N
        out["posterior_variance"] = float(np.mean(var[axis.snap(everything[:, 0])]))
        out["test"] = loss(held_out)
        out["all"] = loss(everything)
    return h, out, fit


def _finite(v) -> float | None:
    return None if v is None or not np.isfinite(v) else float(v)


def _evidence_lambda(cfg: dict, data) -> float:
    """The lambda of maximum evidence for one data set (density: the Laplace path over EVIDENCE_POINTS values and
    its Brent refinement; regression: the exact evidence's optimiser)."""
    return _learning(cfg).evidence_lambda(_with(cfg, data.tolist()), float(cfg["prior"]["lambda"]))


def _laplace_lambda(c: Valid, lam: float) -> float:
    values = np.geomspace(lam / EVIDENCE_SPAN, lam * EVIDENCE_SPAN, EVIDENCE_POINTS)
    return float(evidence_path(c, "lambda", values)["best"]["lambda"])


def _exact_lambda(c: Valid, lam: float) -> float:
    opt = regression.optimise_evidence(c, ("lambda",),
                                       bounds={"lambda": (lam / EVIDENCE_SPAN, lam * EVIDENCE_SPAN)},
                                       start={"lambda": lam})
    return float(opt["lambda"])


def resample_task(task: dict) -> dict:
    """One data set of size ``task["n"]`` (drawn as ``task["mode"]`` says, with the task's own seed) fitted at each
    lambda of ``task["lambdas"]`` (and at its evidence lambda when asked): the errors of each fit.  The unit of
    work sent to a Dask worker (module-level, plain values in and out)."""
    cfg, n, mode = task["cfg"], int(task["n"]), task["mode"]
    rng = _seed_of(task["seed"], task["k"], task["r"])
    errors = _learning(cfg).errors
    held_out = everything = None
    out: dict[str, Any] = {"n": n, "r": int(task["r"])}
    if mode == "teacher":
        data = truth_sampler(cfg)(n, rng)
    else:
        everything = np.asarray(cfg["data"], dtype=float).reshape(-1, 2)
        pick = rng.integers(0, len(everything), size=n)
        data, inbag = everything[pick], np.zeros(len(everything), bool)
        inbag[pick] = True
        held_out = everything[~inbag]
        out["unique_fraction"] = float(inbag.mean())
    fits: list = []
    field = None
    for lam in task["lambdas"]:
        try:
            field, res, _ = errors(cfg, data, lam, field, held_out, everything)
        except RunBudgetExceeded:
            raise
        except FIT_ERRORS as e:
            res, field = {"error": f"{type(e).__name__}: {e}"[:300]}, None
        fits.append(res)
    out["fits"] = fits
    if task.get("evidence"):
        try:
            lam = _evidence_lambda(cfg, data)
            _, res, _ = errors(cfg, data, lam, None, held_out, everything)
            res["lambda"] = lam
        except RunBudgetExceeded:
            raise
        except FIT_ERRORS as e:
            res = {"error": f"{type(e).__name__}: {e}"[:300]}
        out["evidence"] = res
    return out


# --------------------------------------------------------------------------------------------------------------
# the documents
# --------------------------------------------------------------------------------------------------------------
def _stats(values: list) -> tuple[float | None, float | None, int]:
    v = np.array([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return None, None, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0, int(v.size)


def _curve(label: str, lam, sizes: list[int], rows_by_n: list[list[dict]], keys=("train", "test", "all")) -> dict:
    curve: dict[str, Any] = {"label": label, "lambda": lam, "n": list(sizes)}
    names = {"train": "train_error", "test": "test_error", "all": "all_error"}
    for key in keys + ("posterior_variance",):
        means, sds, counts = [], [], []
        for rows in rows_by_n:
            m, s, c = _stats([r.get(key) for r in rows])
            means.append(m)
            sds.append(s)
            counts.append(c)
        if any(c for c in counts):
            curve[names.get(key, key)] = {"mean": means, "sd": sds, "count": counts}
    curve["failed"] = [sum(1 for r in rows if "error" in r) for rows in rows_by_n]
    curve["unconverged"] = [sum(1 for r in rows if r.get("converged") is False) for rows in rows_by_n]
    errs = [r["error"] for rows in rows_by_n for r in rows if "error" in r]
    if errs:
        curve["first_failure"] = errs[0]
    return curve


def resolve_mode(cfg: dict, mode: str | None) -> str:
    """``"teacher"`` when the document has a truth, else ``"bootstrap"`` (``mode`` overrides; bootstrap needs two
    data points or more)."""
    has_truth = cfg.get("truth") is not None
    mode = mode or ("teacher" if has_truth else "bootstrap")
    if mode not in ("teacher", "bootstrap"):
        raise ConfigError(f"mode must be teacher or bootstrap, got {mode!r}")
    if mode == "teacher" and not has_truth:
        truth = _learning(cfg).truth_words
        raise ConfigError(f"teacher mode draws from the truth and the document has none; give {truth}, or use "
                          f"mode bootstrap to resample your data")
    if mode == "bootstrap" and len(cfg.get("data") or []) < 2:
        raise ConfigError("the bootstrap resamples the document's data and needs at least 2 points; add data or "
                          "give a truth for teacher mode")
    return mode


def learning_curve_document(config: dict, sizes, resamples: int = 20, lambdas=None, evidence: bool = False,
                            mode: str | None = None, seed: int = 0, scheduler: str | None = None,
                            progress=None, cancel=None, replica: bool = True, update=None) -> dict:
    """The learning curve of a document (module docstring): train and test error against n, mean and sd over
    ``resamples`` data sets per n, for each lambda of ``lambdas`` (default: the document's lambda times
    :data:`LAMBDA_FACTORS`) and, with ``evidence``, at each data set's evidence-chosen lambda.

    Keys: ``n``, ``train_error`` and ``test_error`` (``{"mean", "sd", "count"}`` per n) of the headline curve (the
    evidence curve when asked, else the document's own lambda, else the first), ``curves`` (one per lambda, label
    ``lambda=<value>``, and ``evidence``), ``lambda``, ``best_lambda`` (per n), ``mode``, ``resamples``, ``seed``,
    ``headline``, ``fits``, ``scheduler``, ``elapsed_s``; bootstrap mode adds ``unique_fraction`` ``{"mean",
    "expected"}`` and each curve an ``all_error``; a regression adds ``posterior_variance`` per curve and, with one
    Gaussian prior, ``replica`` (:mod:`bftcore.models.replica`, an approximation).

    ``update(partial)``, when given, receives the document of the resamples finished so far (``"complete":
    False``, ``finished`` of ``tasks``) at most every :data:`UPDATE_SECONDS` as they finish (the dashboard's curve
    that fills in live); ``progress(done, total)`` and ``cancel()`` as in
    :func:`bftcore.foundations.distributed.run_tasks`."""
    t0 = time.perf_counter()
    cfg = converging_solver(validate_config(config))
    cfg.pop("choose", None)
    mode = resolve_mode(cfg, mode)
    sizes = sorted({int(n) for n in sizes})
    lam0 = float(cfg["prior"]["lambda"])
    lams = [lam0 * f for f in LAMBDA_FACTORS] if lambdas is None else [float(v) for v in lambdas]
    if not sizes or sizes[0] < 1:
        raise ConfigError(f"the sizes n must be positive integers, got {sizes}")
    if not lams or not all(np.isfinite(v) and v > 0 for v in lams):
        raise ConfigError(f"lambda values must be positive finite numbers, got {lams}")
    resamples = int(resamples)
    if resamples < 1:
        raise ConfigError(f"resamples must be at least 1, got {resamples}")
    nodes = kind_of(cfg).nodes(cfg)
    fits_each = len(lams) + (1 + EVIDENCE_POINTS if evidence else 0)
    check_resampling(len(sizes) * resamples * fits_each, nodes, max(sizes))
    if mode == "teacher":
        truth_sampler(cfg)  # refuses a document without a usable truth before any task is sent
    if evidence and _learning(cfg).laplace:  # what the Laplace evidence does not cover, before any task is sent
        try:
            check_model(density.build_density(cfg))
        except ValueError as e:
            raise ConfigError(f"--evidence: {e}") from None
    tasks = [{"cfg": cfg, "mode": mode, "n": n, "k": k, "r": r, "seed": int(seed), "lambdas": lams,
              "evidence": bool(evidence)} for k, n in enumerate(sizes) for r in range(resamples)]
    setup = {"cfg": cfg, "mode": mode, "sizes": sizes, "lams": lams, "lam0": lam0, "evidence": bool(evidence),
             "resamples": resamples, "seed": int(seed)}
    done: list = [None] * len(tasks)
    last = [0.0]

    def collect(i, res):
        done[i] = res
        now = time.perf_counter()
        if update is not None and (now - last[0] >= UPDATE_SECONDS or all(d is not None for d in done)):
            last[0] = now
            partial = assemble(setup, done)
            partial["complete"] = False
            update(partial)
    run_tasks(resample_task, tasks, scheduler, progress=progress, cancel=cancel, on_result=collect)
    doc = assemble(setup, done)
    if replica and _learning(cfg).replica:
        doc["replica"] = replica_curve(cfg, mode, sizes, lam0)
    doc.update({"fits": len(tasks) * fits_each, "scheduler": scheduler or "serial", "complete": True,
                "elapsed_s": time.perf_counter() - t0})
    return doc


def assemble(setup: dict, results: list) -> dict:
    """The learning-curve document of the results so far (None: a task not finished yet): the means and sds over
    the finished resamples of each size (``count`` says how many)."""
    cfg, sizes, lams, lam0 = setup["cfg"], setup["sizes"], setup["lams"], setup["lam0"]
    by_n = [[res for res in results if res is not None and res["n"] == n] for n in sizes]
    curves = [_curve(f"lambda={lam:g}", lam, sizes, [[res["fits"][j] for res in rows] for rows in by_n])
              for j, lam in enumerate(lams)]
    doc: dict[str, Any] = {"model": cfg["model"], "mode": setup["mode"], "n": sizes, "resamples": setup["resamples"],
                           "seed": setup["seed"], "lambda": lams, "curves": curves,
                           "finished": sum(1 for r in results if r is not None), "tasks": len(results)}
    if setup["evidence"]:
        ev_rows = [[res["evidence"] for res in rows] for rows in by_n]
        ev = _curve("evidence", None, sizes, ev_rows)
        stats = [_stats([r.get("lambda") for r in rows]) for rows in ev_rows]
        ev["chosen_lambda"] = {"mean": [s[0] for s in stats], "sd": [s[1] for s in stats],
                               "count": [s[2] for s in stats]}
        curves.append(ev)
    headline = curves[-1] if setup["evidence"] else (curves[lams.index(lam0)] if lam0 in lams else curves[0])
    doc["headline"], doc["headline_lambda"] = headline["label"], headline["lambda"]
    empty = {"mean": [None] * len(sizes), "sd": [None] * len(sizes), "count": [0] * len(sizes)}
    for key in ("train_error", "test_error"):
        doc[key] = copy.deepcopy(headline.get(key, empty))
    doc["best_lambda"] = _best_lambda(curves[:len(lams)], lams, len(sizes))
    if setup["mode"] == "bootstrap":
        N = len(cfg["data"])
        doc["unique_fraction"] = {"mean": [_stats([r["unique_fraction"] for r in rows])[0] for rows in by_n],
                                  "expected": (expected_unique(N, sizes) / N).tolist(), "N": N}
    return doc


def _best_lambda(curves: list[dict], lams: list[float], n_sizes: int) -> list[float | None]:
    best: list[float | None] = []
    for i in range(n_sizes):
        scores = [c.get("test_error", {}).get("mean", [None] * n_sizes)[i] for c in curves]
        ok = [(s, lam) for s, lam in zip(scores, lams) if s is not None]
        best.append(min(ok)[1] if ok else None)
    return best


def replica_curve(cfg: dict, mode: str, sizes: list[int], lam: float) -> dict | None:
    """The replica theory (:mod:`bftcore.models.replica`) for a regression with one Gaussian prior at ``lam``, in the
    simulation's units: ``posterior_variance`` (mean over the nodes, teacher; over the data, bootstrap) and
    ``test_error`` (teacher: the mean of (h - h_true)^2 / 2, i.e. (epsilon - sigma^2)/2; bootstrap: the error on
    all N points, epsilon / 2, to set beside ``all_error``).  None for a mixture of priors (the theory is for one
    Gaussian prior) or more than :data:`bftcore.models.replica.DENSE_PRECISION_MAX_SITES` nodes."""
    model = regression.RegressionModel.from_config(_with(cfg, [], lam))
    if model.m > 1 or len(model.nodes) > replica.DENSE_PRECISION_MAX_SITES:
        return None
    beta = float(cfg["beta"])
    if cfg["prior"]["l0"] == 0:  # an improper prior (K_X annihilates the constants) has no covariance, and the
        return None              # theory needs one (a Cholesky factor could exist by rounding alone)
    try:
        chol = np.linalg.cholesky(beta * model.K0.toarray())
    except np.linalg.LinAlgError:
        return None
    inv_chol = np.linalg.inv(chol)
    C = inv_chol.T @ inv_chol
    noise = 1.0 / beta
    t0 = model.templates[0] if model.m == 1 else np.zeros(len(model.nodes))
    if mode == "teacher":
        assert model.truth is not None
        p = np.full(len(model.nodes), 1.0 / len(model.nodes))
        out = replica.teacher_curve(C, p, model.truth - t0, noise, sizes)
        te = [0.5 * (e - noise) for e in out["test_error"]]
    else:
        data = np.asarray(cfg["data"], dtype=float).reshape(-1, 2)
        ix = model.axis.snap(data[:, 0])
        out = replica.bootstrap_curve(C[np.ix_(ix, ix)], data[:, 1] - t0[ix], noise, sizes)
        te = [0.5 * e for e in out["test_error"]]
    return {"n": list(sizes), "posterior_variance": list(out["posterior_variance"]), "test_error": te,
            "lambda": float(lam), "kind": "replica", "approximation": True,
            "label": "replica theory (approx.)"}


def bootstrap_document(config: dict, resamples: int = 50, level: float = 0.9, seed: int = 0,
                       scheduler: str | None = None, progress=None, cancel=None) -> dict:
    """Bootstrap bands: the document's N data resampled with replacement ``resamples`` times (N each), each fitted
    at the document's hyperparameters; across resamples the mean, sd and central ``level`` band of h(x) (density:
    the regression function (709) of p(y|x)) and, for a density, the mean and sd of P.  With a truth, the bias of
    the mean (``h_bias``, ``P_bias``: resample mean minus truth; P_true normalised over the y nodes).  ``h`` is
    the fit to all the data."""
    t0 = time.perf_counter()
    cfg = validate_config(config)
    cfg.pop("choose", None)
    data = np.asarray(cfg.get("data") or [], dtype=float).reshape(-1, 2)
    if len(data) < 2:
        raise ConfigError("the bootstrap resamples the document's data and needs at least 2 points; add data")
    resamples = int(resamples)
    if resamples < 2:
        raise ConfigError(f"bootstrap bands need at least 2 resamples, got {resamples}")
    if not 0.0 < float(level) < 1.0:
        raise ConfigError(f"level must be between 0 and 1 (e.g. 0.9), got {level}")
    learning = _learning(cfg)  # a kind without a learning study is refused by name before any fit
    grid = grid_from_config(cfg)
    nodes = kind_of(cfg).nodes(cfg)
    check_resampling(resamples + 1, nodes, len(data))
    tasks = [{"cfg": cfg, "r": r, "seed": int(seed)} for r in range(-1, resamples)]
    out = run_tasks(band_task, tasks, scheduler, progress=progress, cancel=cancel)
    full, rest = out[0], [o for o in out[1:] if o is not None]
    if full is None or len(rest) < 2:
        raise ConfigError("the fits of the bootstrap failed; check that the document fits on its own")
    H = np.array([o["h"] for o in rest])
    q = (1.0 - float(level)) / 2.0
    doc: dict[str, Any] = {"model": cfg["model"], "resamples": resamples, "used": len(rest), "level": float(level),
                           "seed": int(seed), "x": grid.x.nodes.tolist(), "h": full["h"],
                           "h_mean": H.mean(axis=0).tolist(), "h_sd": H.std(axis=0, ddof=1).tolist(),
                           "h_lo": np.quantile(H, q, axis=0).tolist(), "h_hi": np.quantile(H, 1 - q, axis=0).tolist()}
    truth_h = truth_P = None
    if learning.bands_of_P:
        P = np.array([o["P"] for o in rest])
        doc.update({"y": grid.y.nodes.tolist(), "P": full["P"], "P_mean": P.mean(axis=0).tolist(),
                    "P_sd": P.std(axis=0, ddof=1).tolist()})
        problem = density.build_density(_with(cfg, []))
        if problem.P_true is not None:
            truth_P = problem.P_true / (problem.P_true.sum(axis=1, keepdims=True) * grid.hy)
            truth_h = regression_function(truth_P, grid)[0]
        doc["P_bias"] = None if truth_P is None else (P.mean(axis=0) - truth_P).tolist()
    else:
        model = regression.RegressionModel.from_config(cfg)
        truth_h = model.truth
    doc["h_bias"] = None if truth_h is None else (H.mean(axis=0) - truth_h).tolist()
    doc.update({"failed": resamples - len(rest), "scheduler": scheduler or "serial",
                "elapsed_s": time.perf_counter() - t0})
    return doc


def band_task(task: dict) -> dict | None:
    """One bootstrap resample (``r >= 0``; ``r = -1`` is the fit to all the data): its h(x) and, for a density,
    P.  None when the fit failed."""
    cfg = task["cfg"]
    data = np.asarray(cfg["data"], dtype=float).reshape(-1, 2)
    if task["r"] >= 0:
        rng = _seed_of(task["seed"], 0, task["r"])
        data = data[rng.integers(0, len(data), size=len(data))]
    try:
        if _learning(cfg).bands_of_P:
            c = _with(cfg, data.tolist())
            fit = kind_of(c).solve(c)
            assert isinstance(fit, density.DensityFit)
            h = regression_function(fit.P, grid_from_config(c))[0]
            return {"h": h.tolist(), "P": fit.P.tolist()}
        rfit = regression.solve(_with(cfg, data.tolist()), None)
        return {"h": rfit.h.tolist()}
    except RunBudgetExceeded:
        raise
    except FIT_ERRORS:
        return None


@dataclass(frozen=True)
class _Learning:
    """What learning curves and the bootstrap do differently per kind of problem (:mod:`bftcore.models.problems`): found
    by the kind's name, so no function here compares a document's ``"model"``."""

    errors: Callable
    truth_sampler: Callable
    evidence_lambda: Callable
    truth_words: str          # what a teacher-mode document lacks, in the refusal
    newton_to_the_end: bool   # field L: Newton to convergence whatever the document's method (converging_solver)
    laplace: bool             # the evidence is Laplace's (its model check runs before any task)
    replica: bool             # the replica-theory curve applies
    bands_of_P: bool          # bootstrap bands of P besides h


_DENSITY_LEARNING = _Learning(_density_errors, _density_truth, _laplace_lambda, "\"truth\": \"paper\"",
                              newton_to_the_end=True, laplace=True, replica=False, bands_of_P=True)
LEARNING = {"density": _DENSITY_LEARNING, "density_1d": _DENSITY_LEARNING,
            "regression": _Learning(_regression_errors, _regression_truth, _exact_lambda,
                                    "the true h(x) as \"truth\"", newton_to_the_end=False, laplace=False,
                                    replica=True, bands_of_P=False)}


def _learning(cfg: dict) -> _Learning:
    kind = kind_of(cfg)
    if kind.name not in LEARNING:
        raise ValueError(f"a learning curve or a bootstrap is not defined for a {kind.name.replace('_', ' ')} "
                         f"document (kinds: {', '.join(LEARNING)}); fit it instead")
    return LEARNING[kind.name]
