"""The Newton benchmark of issue 31: ``python -m bftcore bench`` prints, in one run, bftcore's whole fit against
scipy's L-BFGS-B (reaching the same energy from the same start) and against a sparse-direct Newton floor (the same
Newton iteration with the step solved exactly by a sparse LU of the bordered system), with the CG iterations per
Newton step, for the paper mesh and n x n grids and the priors l2 and l6, and the growth exponents of the times in
the number of nodes.  A benchmark prints a table; nothing here asserts on time.

Two ratios, because L-BFGS-B is timed as a bare solver: from the built problem and the start field (neither on its
clock) to a goal, the fit's energy + 1e-8 |E|.  ``ratio`` sets it against bftcore's whole fit (the gate, building,
the start, the iteration run to the fit's own, stricter stop, the records and the document: what a user waits
for); ``solver_ratio`` against bftcore's Newton iteration timed the same way as L-BFGS-B (:func:`newton_to_goal`:
the same built problem and start off the clock, stopped at the same goal).  Decision: both are printed; the solver
ratio is the like-for-like comparison of the two minimisers, the fit ratio what the fixed costs of a fit add.

Two families of problems (:data:`FAMILIES`), because a larger grid can mean a larger problem or a finer one:

* ``"grid"``: the paper mesh (10 x 15) is Fig 14 (l2 = 0.025) and Fig 16 (l6 = 0.01); an n x n grid is
  :func:`bftcore.models.presets.random_problem` of n, with l2 = 1 or l6 = 0.1 (200 points, x Neumann, y periodic):
  a mesh of unit spacing over the domain [1, n]^2, so the problem grows with the grid (the same 200 points spread
  over more nodes, and the prior's length scale shrinks against the data's spread as 1/n: sparser data, deeper tails
  of L, more local minima); another NX x NY grid takes the points of the max(NX, NY) square, rescaled onto it.
  The table issue 31 was measured on.
* ``"refined"``: one problem on finer and finer grids, what a user who refines the grid of the same data meets:
  ``random_problem(base)`` (by default :data:`REFINED_BASE`, the grid family's 32 x 32 problem) with its data, its
  domain [1, base]^2 and its priors (lambda, l2, l6 mean the same in data units on every grid), on an NX x NY grid.
  Decision: the base is the grid family's 32 x 32 problem, so that its own grid is in the family and it is
  measured from half its resolution to eight times it; ``--base`` refines another (docs/performance.md has 16, 64
  and Fig 16 refined: the base sets the level of the times, not their growth).
"""
from __future__ import annotations

import time

import numpy as np
import scipy.optimize as so
import scipy.sparse as sp
import scipy.sparse.linalg as spl

from ..foundations.limits import UNLIMITED, blas_threads, using
from ..foundations.solvers import DescentStep, IterationController, NewtonMatrix, iterate, line_search
from ..models.density import build_density, initial_field
from ..models.fitting import fit
from ..models.presets import figure_config, random_problem

#: The default sizes: "10x15" is the paper mesh, "n" an n x n grid.
SIZES = ("10x15", "16", "32", "64", "128", "256")
PRIORS = ("l2", "l6")
#: The problem families (module docstring): the problem grows with the grid, or one problem is refined.
FAMILIES = ("grid", "refined")
#: The refined family's problem: ``random_problem(REFINED_BASE)`` (the grid family's 32 x 32 problem).
REFINED_BASE = 32
#: Each family's default sizes: the refined family has no paper mesh (that is the grid family's own problem).
DEFAULT_SIZES = {"grid": SIZES, "refined": tuple(s for s in SIZES if "x" not in s)}
#: ``--quick``'s sizes, a smoke test: each family's defaults up to 32 x 32 (the paper mesh is the grid family's alone).
QUICK_SIZES = {f: tuple(s for s in sizes if max(map(int, s.split("x"))) <= 32) for f, sizes in DEFAULT_SIZES.items()}


def parse_size(text: str) -> tuple[int, int]:
    """``"10x15"`` or ``"64"`` as ``(nx, ny)``; a ValueError names what is wrong."""
    parts = text.lower().split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise ValueError(f"size {text!r} is not a number n or a mesh NXxNY (e.g. 64 or 10x15)") from None
    if len(dims) == 1:
        dims = dims * 2
    if len(dims) != 2 or not all(4 <= d <= 512 for d in dims):
        raise ValueError(f"size {text!r}: give n or NXxNY with every side between 4 and 512")
    return dims[0], dims[1]


def bench_config(size: tuple[int, int], prior: str, family: str = "grid", base: int = REFINED_BASE) -> dict:
    """The benchmark's problem for a size, a prior and a family (see the module docstring); ``base`` is the refined
    family's problem, ``random_problem(base)``."""
    if family == "refined":
        cfg = random_problem(base, {"l2": 1.0} if prior == "l2" else {"l6": 0.1})
        cfg["grid"]["x"]["n"], cfg["grid"]["y"]["n"] = size
        return cfg
    if family != "grid":
        raise ValueError(f"unknown bench family {family!r}; use one of {FAMILIES}")
    if size == (10, 15):
        return figure_config("fig14" if prior == "l2" else "fig16")
    nx, ny = size
    cfg = random_problem(max(nx, ny), {"l2": 1.0} if prior == "l2" else {"l6": 0.1})
    if nx != ny:  # the square problem's points, rescaled onto the rectangle
        m = max(nx, ny)
        pts = (np.asarray(cfg["data"]) - 1.0) * (np.array([nx - 1.0, ny - 1.0]) / (m - 1.0)) + 1.0
        cfg["data"] = pts.tolist()
        cfg["grid"]["x"].update(max=nx, n=nx)
        cfg["grid"]["y"].update(max=ny, n=ny)
    return cfg


def lbfgs_time(config: dict, target: float, max_seconds: float = 300.0) -> tuple[float, float, int]:
    """Seconds L-BFGS-B needs from the same start to reach ``target`` energy; returns (time, energy, evaluations).

    The energy and its g-gradient (L = g - ln sum exp(g), eq. 146) are written out lean here (numpy and one sparse
    product per evaluation, no energy objects), so the baseline is not slowed down by bftcore's bookkeeping.  The
    run stops after ``max_seconds`` (the energy then shows whether it reached the target)."""
    problem = build_density(config)
    grid, N = problem.grid, problem.N.ravel()
    nx, ny = grid.shape
    hy, scale = grid.hy, problem.energy.prior.lam * grid.cell
    K = problem.K.matrix
    t = problem.energy.prior.templates[0].ravel()
    g0 = initial_field(problem).ravel()
    nfev = [0]

    def fun(g):
        nfev[0] += 1
        G = g.reshape(nx, ny)
        m = G.max(axis=1, keepdims=True)
        L = (G - m - np.log(np.exp(G - m).sum(axis=1, keepdims=True) * hy)).ravel()
        u = L - t
        Ku = K @ u
        r = (scale * Ku - N).reshape(nx, ny)
        V = np.exp(L).reshape(nx, ny) * hy
        grad = r - V * r.sum(axis=1, keepdims=True)
        return -N @ L + 0.5 * scale * (u @ Ku), grad.ravel()

    best: list = [np.inf, g0]

    def cb(intermediate_result):
        if intermediate_result.fun < best[0]:
            best[0], best[1] = intermediate_result.fun, intermediate_result.x.copy()
        if intermediate_result.fun <= target or time.perf_counter() - t0 > max_seconds:
            raise StopIteration

    # L-BFGS-B may stop on its own before the target (a failed line search at its precision limit); it is then
    # restarted from its best point (a fresh memory), as long as a restart still lowers the energy
    t0 = time.perf_counter()
    x = g0
    while True:
        before = best[0]
        res = so.minimize(fun, x, jac=True, method="L-BFGS-B", callback=cb,
                          options={"maxiter": 100000, "maxfun": 200000, "ftol": 0.0, "gtol": 0.0, "maxcor": 20})
        if res.fun < best[0]:
            best[0], best[1] = res.fun, res.x.copy()
        if best[0] <= target or time.perf_counter() - t0 > max_seconds or not best[0] < before:
            break
        x = best[1]
    return time.perf_counter() - t0, best[0], nfev[0]


class SparseDirectMatrix(NewtonMatrix):
    """The Newton step of (160) solved exactly by a sparse LU (SuperLU) of the bordered system
    ``[M W; W^T 0] [d; mu] = [-G; 0]``, ``M = lambda cell K + diag(max(Lambda_X, 0) P hy)``, ``W = P hy`` per x
    (the step in the gauge ``sum_y P hy d = 0``; with ``Lambda_X >= 0`` it solves ``J^T M J d = -G`` exactly, else
    the Gauss-Newton form, as the CG path's convexified retry).  For single Gaussian priors (the benchmark's): the
    floor a factorisation per step sets for the same Newton iteration."""

    name = "newton"

    def direction(self, point):
        E = self.energy
        grid, pr = E.grid, E.prior
        n = grid.size
        nx, ny = grid.shape
        V = (point.P * grid.hy).ravel()
        data = np.maximum(point.lagrange_multiplier, 0.0).repeat(ny) * V
        B = sp.csr_matrix((V, (np.arange(n), np.arange(n) // ny)), shape=(n, nx))
        A = sp.bmat([[pr.lam * grid.cell * pr.K.matrix + sp.diags(data), B], [B.T, None]], format="csc")
        sol = spl.splu(A).solve(np.concatenate([-point.gradient.ravel(), np.zeros(nx)]))
        self.cg_iterations = 0
        return sol[:n].reshape(nx, ny), "newton", ()


def newton_run(config: dict, matrix=NewtonMatrix, start=None) -> tuple[float, float, list[int], int]:
    """One Newton run of ``config`` with the learning matrix class ``matrix`` (the stopping rule of the
    configuration; the kernel start, or ``start(problem, kernel_start) -> L0``): ``(seconds of the iteration, final
    energy, CG iterations of each step solved by CG, steps solved by the energy's banded solve)`` (the banded steps
    of a small grid, exact or chord steps, :mod:`bftcore.models.banded_newton`)."""
    problem = build_density(config)
    so_ = problem.config["solver"]
    E = problem.energy
    cg_maxiter = int(min(1000, max(200, problem.grid.size // 16)))  # iterate's default
    step = DescentStep(E, "newton", so_["mass2"], cg_maxiter, line_search)
    newton = step.matrix = matrix(E, so_["mass2"], cg_maxiter)
    counts: list[int] = []  # the CG iterations of each step, read off the matrix after each direction
    direction = newton.direction

    def counted(point):
        before = newton.direct_steps
        out = direction(point)
        if newton.direct_steps == before:
            counts.append(newton.cg_iterations)
        return out
    newton.direction = counted
    phi0 = initial_field(problem)
    if start is not None:
        phi0 = initial_field(problem, start(problem, phi0))  # an array: normalised as a warm start is
    t0 = time.perf_counter()
    energy = np.nan
    for rec in iterate(E, phi0, step=step,
                       controller=IterationController(so_["min_iter"], so_["max_iter"], so_["tol"])):
        energy = rec.energy
    return time.perf_counter() - t0, float(energy), counts, newton.direct_steps


def newton_to_goal(config: dict, goal: float) -> tuple[float, float, int]:
    """bftcore's Newton iteration timed as :func:`lbfgs_time` times L-BFGS-B: the same problem built beforehand
    (outside the clock), the same start, stopped at the first iterate whose energy is at most ``goal``.  Returns
    ``(seconds, energy, Newton steps)``; the iteration is the one :func:`bftcore.api.fit` runs (the configuration's
    method and settings), its own stopping rule applying if it ends first (the energy then shows it)."""
    problem = build_density(config)
    so_ = problem.config["solver"]
    phi0 = initial_field(problem)
    t0 = time.perf_counter()
    energy, steps = np.inf, 0
    for rec in iterate(problem.energy, phi0, method=so_["method"], mass2=so_["mass2"], min_iter=so_["min_iter"],
                       max_iter=so_["max_iter"], tol=so_["tol"]):
        energy, steps = rec.energy, rec.iteration
        if energy <= goal:
            break
    return time.perf_counter() - t0, float(energy), int(steps)


#: A measurement whose warm-up run took less than :data:`BATCH_S` is timed, in each repeat, as the mean of a batch of
#: calls lasting about :data:`BATCH_S` (at most :data:`MAX_BATCH` calls), as ``timeit`` does.  Decision (2026-11-29):
#: a fit of 16 x 16 takes 1-3 ms, and this VM's speed flips between two levels about 1.7 times apart from one
#: millisecond to the next, so a median of 5 single calls moved a small grid's ratio by 10-15 % from run to run; a
#: batch averages over the flips, and the three measurements still take turns batch by batch.
BATCH_S = 0.05
MAX_BATCH = 200


def batch_size(first_s: float) -> int:
    """How many calls one timed run of a measurement makes, from its warm-up run's ``first_s`` seconds."""
    return max(1, min(MAX_BATCH, int(np.ceil(BATCH_S / max(first_s, 1e-9)))))


def _timed_batch(call, k: int) -> tuple:
    """``call()`` run ``k`` times: ``(mean seconds, the highest energy, the last steps or evaluations)`` for the
    measurements that return ``(seconds, energy, count)`` (their own clocks, so that what they leave off the clock
    stays off)."""
    runs = [call() for _ in range(k)]
    return float(np.mean([r[0] for r in runs])), max(r[1] for r in runs), runs[-1][2]


def growth_exponent(nodes, seconds) -> float:
    """Slope of log time against log nodes (least squares); NaN with fewer than two sizes."""
    if len(nodes) < 2:
        return float("nan")
    return float(np.polyfit(np.log(nodes), np.log(seconds), 1)[0])


def run(sizes=None, priors=PRIORS, repeats: int = 3, lbfgs_max_s: float = 10.0, floor_max_nodes: int = 4096,
        repeat_budget_s: float = 3.0, families=("grid",), base: int = REFINED_BASE):
    """Measure every (family, size, prior) of ``families`` (:data:`FAMILIES`; ``base`` is the refined family's
    problem; ``sizes``: the sizes of every family, a dict of them per family (as :data:`QUICK_SIZES`), or None for
    each family's :data:`DEFAULT_SIZES`): a list of row dicts (times in seconds, medians over ``repeats``; of the
    three measurements, bftcore's fit, its iteration to the goal and L-BFGS-B, one whose first run takes over
    ``repeat_budget_s``, or for L-BFGS-B stops before the goal, is run once; the others' first runs are a warm-up,
    and their repeats are taken in turn, run by run; a run of one whose warm-up took under :data:`BATCH_S` is the
    mean of a batch of :func:`batch_size` calls, the row's ``batch``).
    L-BFGS-B's budget in a case is the larger of ``lbfgs_max_s`` and twice bftcore's first fit, so that a run stopped
    before the goal still says which solver is faster (ratio > 2): with 10 s alone, 256 x 256 l6 (bftcore 37 s)
    printed "> 0.27", which says nothing; L-BFGS-B had not reached the goal there after 600 s (one run,
    2026-11-27).  The sparse-direct floor is measured up to ``floor_max_nodes`` (its LU of the bordered system
    fills in: 2.4 s at 64 x 64 l6)."""
    blas_threads()
    rows = []
    with using(UNLIMITED):
        per_family = sizes if isinstance(sizes, dict) else {f: sizes for f in families}
        for family, text, prior in ((f, t, p) for f in families for t in (per_family.get(f) or DEFAULT_SIZES[f])
                                    for p in priors):
            size = parse_size(text)
            cfg = bench_config(size, prior, family, base)
            t = time.perf_counter()
            doc = fit(cfg)
            times: list = [time.perf_counter() - t]
            energy = float(doc["energy"])
            _, _, cg, banded = newton_run(cfg)
            goal = energy + 1e-8 * abs(energy)
            to_goal = [newton_to_goal(cfg, goal)]
            budget = max(lbfgs_max_s, 2.0 * times[0])
            lb = [lbfgs_time(cfg, goal, budget)]
            # each measurement whose first run took at most repeat_budget_s (and, for L-BFGS-B, reached the goal)
            # is repeated: its first run was the warm-up (caches, first calls), and the repeats of the three are
            # taken in turn, run by run, so that a change in the machine's speed (this VM's doubles within
            # minutes) falls on all of them alike and the ratios hold; a slow one is run once (the table stays
            # minutes)
            again = [times[0] <= repeat_budget_s, to_goal[0][0] <= repeat_budget_s,
                     lb[0][0] <= repeat_budget_s and lb[0][1] <= goal] if repeats > 1 else [False] * 3
            batch = [batch_size(times[0]), batch_size(to_goal[0][0]), batch_size(lb[0][0])]
            times = [] if again[0] else times
            to_goal = [] if again[1] else to_goal
            lb = [] if again[2] else lb
            for _ in range(repeats if any(again) else 0):
                if again[0]:
                    t = time.perf_counter()
                    for _ in range(batch[0]):
                        fit(cfg)
                    times.append((time.perf_counter() - t) / batch[0])
                if again[1]:
                    to_goal.append(_timed_batch(lambda: newton_to_goal(cfg, goal), batch[1]))
                if again[2]:
                    lb.append(_timed_batch(lambda: lbfgs_time(cfg, goal, budget), batch[2]))
            batch = [k if a else 1 for k, a in zip(batch, again)]
            t_fit = float(np.median(times))
            t_goal = float(np.median([r[0] for r in to_goal]))
            t_lb = float(np.median([r[0] for r in lb]))
            lb_ok = min(r[1] for r in lb) <= goal
            floor = [newton_run(cfg, SparseDirectMatrix) for _ in range(repeats)] \
                if size[0] * size[1] <= floor_max_nodes else []
            rows.append({"family": family, "size": f"{size[0]}x{size[1]}", "nodes": size[0] * size[1],
                         "prior": prior, "bftcore_s": t_fit, "iterations": int(doc["iterations"]), "energy": energy,
                         "lbfgs_s": t_lb, "lbfgs_reached": bool(lb_ok), "lbfgs_budget_s": budget,
                         "ratio": t_lb / t_fit,
                         "newton_goal_s": t_goal, "newton_goal_steps": to_goal[0][2],
                         "solver_ratio": t_lb / t_goal,
                         "floor_s": float(np.median([f[0] for f in floor])) if floor else None,
                         "floor_energy": floor[0][1] if floor else None,
                         "newton_steps": len(cg) + banded, "banded_steps": banded,
                         "cg_per_step": float(np.mean(cg)) if cg else 0.0,
                         "cg_max": int(max(cg)) if cg else 0,
                         "batch": {"fit": batch[0], "to_goal": batch[1], "lbfgs": batch[2]}})
    return rows


def exponents(rows, family: str = "grid") -> dict:
    """Growth exponents per prior, bftcore and L-BFGS-B, over the n x n sizes of a family's rows (the paper mesh
    and other NX x NY sizes left out); None with fewer than two such sizes."""
    out = {}
    rows = [r for r in rows if r["family"] == family]
    for prior in sorted({r["prior"] for r in rows}):
        sel = [r for r in rows if r["prior"] == prior and len(set(r["size"].split("x"))) == 1]
        nodes = [r["nodes"] for r in sel]
        fits = {"bftcore": growth_exponent(nodes, [r["bftcore_s"] for r in sel]),
                "newton_goal": growth_exponent(nodes, [r["newton_goal_s"] for r in sel]),
                "lbfgs": growth_exponent(nodes, [r["lbfgs_s"] for r in sel])}
        out[prior] = {k: (v if np.isfinite(v) else None) for k, v in fits.items()}
    return out


#: The table's line for each family.
FAMILY_TITLES = {"grid": "the paper mesh, and random_problem(n) on an n x n mesh of unit spacing: the problem grows "
                         "with the grid",
                 "refined": "random_problem({base})'s data, domain [1, {base}]^2 and priors on an n x n grid: one "
                            "problem, refined"}


def table(rows, repeats: int, lbfgs_max_s: float, base: int = REFINED_BASE) -> str:
    """The rows and the exponents as text, a block per family."""
    lines = [f"bftcore Newton benchmark: medians of {repeats} run(s) after a warm-up run, fit, to goal and L-BFGS-B "
             f"taken in turn; times in ms; a measurement over 3 s is run once, one under {BATCH_S * 1e3:g} ms is "
             f"timed as the mean of a batch of calls lasting about {BATCH_S * 1e3:g} ms",
             "  fit = bftcore's whole fit (the gate, building, the start, the iteration to its own stop, the records, "
             "the document)",
             "  to goal = bftcore's Newton iteration alone, from the start L-BFGS-B takes, to L-BFGS-B's goal "
             "(the fit's energy + 1e-8 |E|)",
             "  ratio = L-BFGS-B / fit, solver = L-BFGS-B / to goal (> 1: bftcore faster); '>' = L-BFGS-B stopped "
             f"before the goal, at the larger of {lbfgs_max_s:g} s and twice bftcore's fit",
             "  floor = sparse-direct Newton to the fit's stop ('-': not run above 4096 nodes)",
             "  banded = Newton steps solved by the banded Cholesky (small grids: the exact step, or after a small "
             "step a chord step with its factor); CG/step and CG max count the others"]
    families = [f for f in FAMILIES if any(r["family"] == f for r in rows)]
    for family in families:
        lines += [f"{family} family: {FAMILY_TITLES[family].format(base=base)}",
                  f"{'size':>8} {'prior':>5} {'fit':>9} {'to goal':>9} {'L-BFGS-B':>10} {'ratio':>7} {'solver':>7} "
                  f"{'floor':>9} {'iters':>5} {'banded':>6} {'CG/step':>8} {'CG max':>6}"]
        for r in (r for r in rows if r["family"] == family):
            mark = "" if r["lbfgs_reached"] else ">"
            floor = "-" if r["floor_s"] is None else f"{r['floor_s'] * 1e3:.1f}"
            lines.append(f"{r['size']:>8} {r['prior']:>5} {r['bftcore_s'] * 1e3:>9.1f} "
                         f"{r['newton_goal_s'] * 1e3:>9.1f} "
                         f"{mark + format(r['lbfgs_s'] * 1e3, '.1f'):>10} {mark + format(r['ratio'], '.2f'):>7} "
                         f"{mark + format(r['solver_ratio'], '.2f'):>7} "
                         f"{floor:>9} {r['iterations']:>5} {r['banded_steps']:>6} {r['cg_per_step']:>8.1f} "
                         f"{r['cg_max']:>6}")
    lines.append("growth exponents (log time vs log nodes, n x n sizes):")
    for family in families:
        for prior, e in exponents(rows, family).items():
            b, g, lb = ("-" if v is None else f"{v:.2f}" for v in (e["bftcore"], e["newton_goal"], e["lbfgs"]))
            name = prior if family == "grid" else f"{family} {prior}"
            lines.append(f"  {name}: bftcore fit {b}, to goal {g}, L-BFGS-B {lb}")
    return "\n".join(lines)
