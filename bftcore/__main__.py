"""Command line: ``python -m bftcore fit|reproduce|sweep|basins|evidence|learning-curve|bootstrap|replica|bench``
(CONVENTIONS.md §4).

User errors (bad files, bad keys, points off the grid, a problem over the cost budget of
:mod:`bftcore.foundations.limits`, a run over its time budget, ...) print one line naming the problem on stderr and exit
with status 2; they never print a traceback.  ``--no-limits`` lifts the cost budget (not the checks of correctness) for
a researcher's own machine.  Exit status 1 with one line is a bug of bftcore, never the input's fault.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time

import numpy as np

from . import api
from .foundations.config import (
    ConfigError,
    Valid,
    check_evidence_path,
    kind_of,
    load_config,
    read_document,
    validate_config,
    validate_sweep,
)
from .foundations.distributed import Cancelled, parse_scheduler, using_tls
from .foundations.limits import LIMITS, UNLIMITED, Limits, RunBudgetExceeded, blas_threads, deadline, using
from .foundations.operators import SingularOperatorError
from .foundations.tables import by_evidence, data_document, read_labelled_table
from .models import replica_tables
from .models.evidence import PATH_MAX_DROP
from .models.presets import REAL_DATA, TITLES, figure_config
from .models.problems import ROBUST_DENSITY, ROBUST_REGRESSION
from .outputs import export, figures, result_tables
from .studies import bench
from .studies.learning import parse_sizes
from .studies.small_figures import PAPER_000, SMALL_FIGURES

FIGURES = [f"fig{k}" for k in (14, 15, 16, 17, 21, 22, 23, 24, 25, 26, 27, 28)] + list(REAL_DATA)
#: Every name ``reproduce`` takes: the fit presets and real data sets, the fig7 sweep, the small figures.
REPRODUCIBLE = FIGURES + ["fig7"] + list(SMALL_FIGURES)


#: The ``replica`` command's description in ``--help``: the model, the standardisation, and how to run Fig 2.
REPLICA_DESCRIPTION = (
    "GP regression of one column of a CSV table on the others, with the kernel K(x, x') = exp(-sum_i (x_i - x'_i)^2 "
    "/ (l2 v_i)) and noise sigma^2; for each size m the replica theory and the simulated simple bootstrap (m rows "
    "drawn with replacement, tested on all N): the average posterior variance and the mean square error. "
    "Standardisation: the target is standardised over the whole table, (y - mean) / sd, so that sigma^2 and the "
    "errors are in units of its variance; each input column is normalised (--inputs, onto [0, 1] by default), then "
    "scaled by v_i (--scales). The paper's Fig 2 on Abalone (UCI "
    "abalone.data with a header line sex,length,diameter,height,whole,shucked,viscera,shell,rings): replica "
    "abalone.csv --target rings --l2 10 --noise 0.1 --scales var --one-hot sex --sizes 100:8000:10 --subset 2000 "
    "--no-limits (and again with --subset 1000).")


def reproducible() -> list[dict]:
    """What ``reproduce --list`` prints: per name, its paper, its figure (None for a real data set) and a title."""
    out: list[dict] = []
    for name in REPRODUCIBLE:
        if name in SMALL_FIGURES:
            entry = SMALL_FIGURES[name]
            out.append({"name": name, "paper": entry.paper, "figure": entry.figure, "title": entry.title})
        elif name in REAL_DATA:
            out.append({"name": name, "paper": "real data", "figure": None, "title": TITLES[name]})
        else:
            figure, title = TITLES[name].split(": ", 1)
            if name == "fig7":  # TITLES: "Fig 7 [001]": 000's Fig 7 (and Fig 8) is 001's Fig 3
                figure, title = "Fig 7", title + " (the 0-dimensional model of 001 Fig 3)"
            out.append({"name": name, "paper": PAPER_000, "figure": figure, "title": title})
    return out


def _summary_list(doc: dict) -> str:
    width = max(len(f["name"]) for f in doc["figures"]) + 2
    return "\n".join(f"{f['name']:<{width}}{f['paper']}" + (f" {f['figure']}" if f["figure"] else "") +
                     f": {f['title']}" for f in doc["figures"])


def _summary_small(doc: dict) -> str:
    """A small figure's document in a few lines: per panel, M at n = 0, 2 and the end and the final posterior
    (Fig 3), or the maxima of the joint posterior (Figs 6, 9, 10), or the curves' names."""
    name = str(doc.get("figure", ""))
    entry = SMALL_FIGURES.get(name)
    lines = [f"{name}: {entry.paper} {entry.figure}: {entry.title}" if entry else name]
    if "rows" in doc:  # a replica learning curve (002 Fig 1): its rows, as the replica command prints them
        return "\n".join(lines + [_summary_replica(doc)])
    if "seeds" in doc:  # the BYY demo: the counts per seed and the held-out log-losses
        s = doc["summary"]
        lines.append(f"  components kept (weight > {doc['keep_threshold']}), harmony: {s['harmony_components']}, "
                     f"ML: {s['ml_components']}; medians {s['median_harmony_components']:g} and "
                     f"{s['median_ml_components']:g}")
        lines.append("  mean held-out log-loss: " + ", ".join(f"{k} {v:.4f}" for k, v in
                                                              s["mean_held_out_log_loss"].items()) +
                     f" (true mixture {s['true_held_out_log_loss']:.4f})")
        return "\n".join(lines)
    if "temperatures" in doc:
        lines.append(f"  beta_c = {doc['beta_c']:.4g}; undeformed template RMSE {doc['rmse_template']:.4f}")
        for t in doc["temperatures"]:
            th = t["theta"][0]
            lines.append(f"  beta = {t['beta_over_beta_c']:g} beta_c: a = ({t['a'][0]:.4f}, {t['a'][1]:.4f}), "
                         f"RMSE {t['rmse']:.4f}, theta_1 = ({th['shift_x']:.2f}, {th['shift_y']:.2f}) px, "
                         f"scale {th['scale']:.3f}, {th['angle_deg']:.2f} deg")
        sw = doc["sweep"]
        lines.append("  sweep beta/beta_c " + " ".join(f"{b:g}" for b in sw["beta_over_beta_c"]) + ": a_1 up " +
                     " ".join(f"{a:.3f}" for a in sw["a1_up"]) + ", down " +
                     " ".join(f"{a:.3f}" for a in sw["a1_down"]) + f"; hysteresis: {sw['hysteresis']}")
        return "\n".join(lines)
    for p in doc["panels"]:
        if "M" in p:
            m, post = p["M"], p["posterior"][-1]
            lines.append(f"  {p.get('label', '')}: M(0) = {m[0]:.4g}, M(2) = {m[2]:.4g}, M({len(m) - 1}) = "
                         f"{m[-1]:.3g}; posterior at n = {len(m) - 1}: {', '.join(f'{w:.4g}' for w in post)}")
        elif "maxima" in p:
            key = "gamma" if "gamma" in p else "beta"
            where = "; ".join(f"h = {m['h']:.6g}, {key} = {m[key]:.6g}" +
                              (f" (at the {m['edge']} edge: the maximum runs off the grid)" if m.get("edge") else "")
                              for m in p["maxima"])
            lines.append(f"  {p.get('hyperprior', '')} p({key}), y_D = {p.get('y_D')}: maximum {where}")
        else:
            lines.append(f"  {p.get('title', '')}: " + ", ".join(str(c.get("label", "")) for c in p["curves"]))
    return "\n".join(lines)


def _dump(doc) -> str:
    # keys starting with "_" carry arrays for the drawers (the images of image_completion), not the printed record
    if isinstance(doc, dict):
        doc = {k: v for k, v in doc.items() if not str(k).startswith("_")}
    return json.dumps(doc, allow_nan=False, default=lambda o: o.tolist() if isinstance(o, np.ndarray) else float(o))


def _grid_line(cfg: dict | None) -> list[str]:
    """The grid a fit ran on (a data table's grid is fitted to its data, so the user has not seen it), each axis
    with its label (a CSV header's name) when the document has one."""
    if not cfg or not cfg.get("grid"):
        return []
    grid, labels = cfg["grid"], cfg.get("labels") or {}
    parts = []
    for name in ("x", "y"):
        ax = grid.get(name)
        if ax is None:
            continue
        named = f"{name} ({labels[name]})" if name in labels else name
        if ax["n"] == 1:
            parts.append(f"{named} one node (a 1-D density)" if name == "x" else f"{named} one node")
        else:
            parts.append(f"{named} {ax['n']} nodes on [{ax['min']:.6g}, {ax['max']:.6g}], {ax['boundary']}")
    return ["grid          " + "; ".join(parts)]


def _summary_fit(doc: dict, cfg: dict | None = None) -> str:
    lines = [f"model {doc.get('model')}" + (f", field {doc['field']}" if "field" in doc else ""),
             *_grid_line(cfg),
             f"energy        {doc['energy']:.10g}",
             f"train error   {doc['train_error']:.6g}" if doc.get("train_error") is not None else "train error   -",
             f"test error    {doc['test_error']:.6g}" if doc.get("test_error") is not None else "test error    -",
             f"iterations    {doc['iterations']} ({'converged' if doc['converged'] else 'not converged'})",
             f"mixing a_j    {', '.join(f'{a:.4g}' for a in doc['mixing'])}"]
    if "max_P" in doc:
        lines.insert(3, f"max P         {doc['max_P']:.6g}")
    if "exact" in doc:
        lines.append(f"exact b_j     {', '.join(f'{b:.4g}' for b in doc['exact']['b'])}")
    if "local" in doc:
        lines.append(_local_line(doc["local"]))
    if "evidence" in doc:
        ev = doc["evidence"]
        lines.append("chosen by evidence: " + ", ".join(f"{k} = {v:.6g}" for k, v in ev["chosen"].items())
                     + f" (log evidence {ev['log_evidence']:.6f})")
    lines.append(f"solve time    {doc['elapsed_s'] * 1e3:.1f} ms")
    for n in doc.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)


def _local_line(local: dict) -> str:
    """Where a local prior's labels say the fit bends: the edges won by an alternative other than the first (a
    switch's soft edges), or the edges whose stiffness is below a tenth of the document's Gaussian one."""
    ex = np.asarray(local["edge_x"], dtype=float)
    if local["type"] == "switch":
        a = np.asarray(local["responsibilities"], dtype=float)
        marked, what = np.argmax(a, axis=0) > 0, "edges won by alternative >= 2 (a_k > others)"
    else:
        marked, what = np.asarray(local["log_stiffness"], dtype=float) < np.log(0.1), "edges with stiffness < 0.1 x"
    where = ", ".join(f"{v:.6g}" for v in ex[marked][:12]) + (" ..." if marked.sum() > 12 else "") or "none"
    cuts = f"; cuts at x = {', '.join(f'{c:g}' for c in local['cuts'])}" if local["cuts"] else ""
    return f"local {local['type']}: {what}: x = {where}{cuts}"


def _document_of(args) -> dict | None:
    """The validated document a command ran (``reproduce``: its preset's), None when there is none."""
    cfg = getattr(args, "document", None)
    if cfg is None and args.command == "reproduce" and args.name != "fig7":
        cfg = validate_config(figure_config(args.name))
    return cfg


def _summary_sweep(doc: dict) -> str:
    out = []
    for br in doc["branches"]:
        a1 = [m[0] for m in br["mixing"]]
        out.append(f"{br['direction']:>4}: beta {br['beta'][0]:.4g} -> {br['beta'][-1]:.4g}, "
                   f"a_1 {a1[0]:.4f} -> {a1[-1]:.4f}, {sum(br['stable'])}/{len(br['stable'])} stable")
    bif = doc.get("bifurcations", [])
    out.append("bifurcations: " + (", ".join(f"{b:.4f}" for b in bif) if bif else "none found"))
    return "\n".join(out)


def _summary_basins(doc: dict) -> str:
    out = [f"{len(doc['minima'])} distinct minima"]
    for k, m in enumerate(doc["minima"]):
        te = "-" if m.get("test_error") is None else f"{m['test_error']:.4f}"
        out.append(f"  {k}: energy {m['energy']:.8g}, test error {te}, mixing "
                   f"{', '.join(f'{a:.3f}' for a in m['mixing'])}, reached from {', '.join(map(str, m['starts']))}")
    return "\n".join(out)


def _summary_evidence(doc: dict) -> str:
    name = doc["parameter"]
    best = doc["best"]
    out = [f"log evidence ({doc['method']}) of the {doc['model']} model along {name}:",
           f"{name:>12}  {'log evidence':>14}"]
    skipped = set(doc.get("skipped") or [])
    for v, e in zip(doc[name], doc["log_evidence"]):
        if e is not None and math.isfinite(e):
            out.append(f"{v:>12.5g}  {e:>14.6f}")
        elif v in skipped:  # the path stopped: the evidence had fallen far below its maximum
            out.append(f"{v:>12.5g}  {'-':>14}  (not solved: the path stopped {PATH_MAX_DROP:g} below the maximum)")
        else:
            out.append(f"{v:>12.5g}  {'-':>14}  (no Laplace evidence here: see \"failed\" in --json)")
    out.append(f"best: {name} = {best[name]:.6g}, log evidence {best['log_evidence']:.6f}")
    if doc.get("edge"):
        out.append(f"note: the evidence is largest at the {doc['edge']} end of the values: it may rise beyond "
                   f"them, so {name} = {best[name]:.6g} is a bound, not a maximum (without values given, the "
                   f"path went as far as this grid allows)")
    return "\n".join(out)


def _cell(v, fmt: str = ".4g") -> str:
    return "-" if v is None else format(v, fmt)


def _summary_learning(doc: dict) -> str:
    out = [f"learning curve of the {doc['model']} model ({doc['mode']}, {doc['resamples']} resamples a size, "
           f"{doc['fits']} fits, {doc['elapsed_s']:.1f} s on {doc['scheduler']}); headline {doc['headline']}",
           f"{'n':>6}  {'train mean':>10} {'sd':>8}  {'test mean':>10} {'sd':>8}  {'best lambda':>11}"]
    tr, te = doc["train_error"], doc["test_error"]
    for i, n in enumerate(doc["n"]):
        out.append(f"{n:>6}  {_cell(tr['mean'][i]):>10} {_cell(tr['sd'][i], '.2g'):>8}  "
                   f"{_cell(te['mean'][i]):>10} {_cell(te['sd'][i], '.2g'):>8}  {_cell(doc['best_lambda'][i]):>11}")
    if doc["mode"] == "bootstrap":
        out.append("test error = out-of-bag error (points never drawn); the in-bag fraction of distinct points is "
                   "in --json (unique_fraction)")
    failed = sum(sum(c["failed"]) for c in doc["curves"])
    if failed:
        out.append(f"note: {failed} fits failed and are left out of the means (see curves[].first_failure)")
    return "\n".join(out)


def _summary_replica(doc: dict) -> str:
    """The rows of a replica learning curve (:func:`bftcore.models.replica_tables.replica_rows`) as a table."""
    out = [f"GP regression of {doc['target']!r} on {len(doc['inputs'])} inputs, N = {doc['N']}: l2 = {doc['l2']:g}, "
           f"v_i = {doc['scales']}, sigma^2 = {doc['noise']:g}; {doc['standardisation']['text']}",
           f"simple bootstrap: m rows drawn with replacement, tested on the N rows of the part "
           f"({doc['resamples']} resamples a size, seed {doc['seed']}); theory = replica approximation",
           f"{'part':>12} {'N':>5} {'m':>7}  {'variance theory':>15} {'simulated':>10}  {'error theory':>12} "
           f"{'simulated':>10}"]
    for r in doc["rows"]:
        out.append(f"{r['part']:>12} {r['N']:>5} {r['m']:>7}  {r['theory_variance']:>15.5g} "
                   f"{_cell(r['simulated_variance'], '.5g'):>10}  {r['theory_error']:>12.5g} "
                   f"{_cell(r['simulated_error'], '.5g'):>10}")
    return "\n".join(out)


def _summary_bootstrap(doc: dict) -> str:
    out = [f"bootstrap of the {doc['model']} model: {doc['used']} of {doc['resamples']} resamples, "
           f"{doc['level']:.0%} band of h(x) ({doc['elapsed_s']:.1f} s on {doc['scheduler']})",
           f"{'x':>9}  {'h (all data)':>12}  {'mean':>9}  {'sd':>8}  {'lo':>9}  {'hi':>9}"]
    for i, x in enumerate(doc["x"]):
        out.append(f"{x:>9.4g}  {doc['h'][i]:>12.5g}  {doc['h_mean'][i]:>9.5g}  {doc['h_sd'][i]:>8.3g}  "
                   f"{doc['h_lo'][i]:>9.5g}  {doc['h_hi'][i]:>9.5g}")
    return "\n".join(out)


class _Bar:
    """A progress bar on stderr (a terminal, or ``--progress``): fits done of the total, and the time so far."""

    def __init__(self, what: str, stream=None, width: int = 30):
        self.what, self.stream, self.width, self.t0 = what, stream or sys.stderr, width, time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        k = int(self.width * done / max(1, total))
        end = "\n" if done >= total else ""
        self.stream.write(f"\r{self.what} [{'#' * k}{'.' * (self.width - k)}] {done}/{total} data sets "
                          f"({time.perf_counter() - self.t0:.1f} s){end}")
        self.stream.flush()


def _progress(args, what: str):
    return _Bar(what) if getattr(args, "progress", False) or sys.stderr.isatty() else None


def _lambda_values(text: str | None):
    if text is None:
        return None
    lo, hi, n = _beta_range(text, "--lambda")
    if not 0 < lo <= hi or n < 1:
        raise ConfigError(f"--lambda needs 0 < MIN <= MAX and N >= 1 (log-spaced), got {text!r}")
    return np.geomspace(lo, hi, n).tolist()


def _beta_range(text: str, flag: str = "--beta"):
    parts = text.split(":")
    if len(parts) != 3 or len(text) > 100:
        raise ConfigError(f"{flag} must be MIN:MAX:N (e.g. 0.5:4:50), got {text[:40]!r}")
    try:
        lo, hi = float(parts[0]), float(parts[1])
        n = float(parts[2])
    except ValueError:
        raise ConfigError(f"{flag} must be MIN:MAX:N with numbers (e.g. 0.5:4:50), got {text!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(n)):
        raise ConfigError(f"{flag} needs finite numbers, got {text!r}")
    if n != int(n):
        raise ConfigError(f"{flag}: N must be a whole number, got {parts[2]!r}")
    return lo, hi, int(n)


def _evidence_values(text: str, flag: str, nodes: int):
    """Log-spaced values of an evidence path from MIN:MAX:N (0 < MIN < MAX, 2 <= N within the budget)."""
    lo, hi, n = _beta_range(text, flag)
    if not 0 < lo < hi:
        raise ConfigError(f"{flag} needs 0 < MIN < MAX (the values are log-spaced), got {text!r}")
    if n < 2:
        raise ConfigError(f"{flag}: N must be at least 2, got {n}")
    check_evidence_path(n, nodes, where=flag)
    return np.geomspace(lo, hi, n)


def at_least(low: int):
    """An argparse type: a whole number >= ``low``, checked at the door, so that the message names the option
    before any worker starts (``--seed=-1`` used to reach three Dask workers and come back as their tracebacks).
    Public: the scripts' counts (``scripts/banded_newton_ab.py --repeats``) are checked by the same rule."""
    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {text[:40]!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {low}, got {value}")
        return value
    return whole


def _fraction(text: str) -> float:
    """An argparse type: a probability strictly between 0 and 1 (a band's level)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (e.g. 0.9), got {text[:40]!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (e.g. 0.9), got {text[:40]}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (the CLI's contract: one line and exit 2 for every bad input)."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _limits(args) -> Limits:
    return UNLIMITED if getattr(args, "no_limits", False) else LIMITS


def _run(args) -> tuple[dict, str]:
    blas_threads()  # the BLAS threads of a bftcore process (bftcore.foundations.limits.BLAS_THREADS)
    lim = _limits(args)
    if args.command == "reproduce":
        return _reproduce(args)
    _check_outputs(args)
    if args.command == "replica":
        with using(lim), deadline(lim.run_seconds):
            return _replica(args)
    with using(lim):
        cfg = _document(args)   # through the gate once: a Valid document from here on
        args.document = cfg
        with deadline(lim.run_seconds), _tls(args):
            return _run_config(args, cfg)


def _replica(args) -> tuple[dict, str]:
    """``replica``: the table read and checked at the door (size, rows, columns), then the theory and the
    simulation (:func:`bftcore.models.replica_tables.replica_rows`)."""
    table = replica_tables.read_input_table(args.table, args.target, args.one_hot or ())
    doc = replica_tables.replica_rows(table, args.l2, args.noise, parse_sizes(args.sizes, "--sizes"),
                                      scales=args.scales, halves=args.halves, resamples=args.resamples,
                                      seed=args.seed, progress=_progress(args, "replica simulation"),
                                      inputs=args.inputs, split=args.split)
    if args.subset is not None:
        doc["rows"] += replica_tables.subset_rows(table, args.l2, args.noise, doc["sizes"], args.subset,
                                                  args.repeats, scales=args.scales, seed=args.seed,
                                                  inputs=args.inputs)
    doc["panels"] = replica_tables.figure_panels(doc)
    return doc, "replica"


def _reproduce(args) -> tuple[dict, str]:
    if args.list:
        return {"figures": reproducible()}, "list"
    if args.name is None:
        raise ConfigError("reproduce needs a NAME (reproduce --list prints them)")
    if args.name not in REPRODUCIBLE:
        raise ConfigError(f"unknown figure {args.name!r}; choose one of {', '.join(REPRODUCIBLE)}")
    _check_outputs(args)
    if args.name in SMALL_FIGURES:
        figure = SMALL_FIGURES[args.name]
        if args.full_size:
            if figure.full_size is None:
                raise ConfigError(f"{args.name} has one size; --full-size is for "
                                  f"{', '.join(n for n, f in SMALL_FIGURES.items() if f.full_size)}")
            return figure.full_size(), "small-figure"
        return figure.compute(), "small-figure"
    if args.full_size:
        raise ConfigError(f"{args.name} has one size; --full-size is for "
                          f"{', '.join(n for n, f in SMALL_FIGURES.items() if f.full_size)}")
    if args.name == "fig7":
        if args.png is not None:
            raise ConfigError("fig7 is a sweep document and has no figure; --png draws the fits and small figures")
        return api.fig7_document(), "sweep"
    if args.png is not None:  # the fit's figure is drawn from its validated document
        args.document = validate_config(figure_config(args.name))
    return api.fit(figure_config(args.name)), "fit"


#: File names read as data tables (CSV or whitespace) rather than JSON configurations.
TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".dat", ".tab")


def _document(args) -> Valid:
    """The validated configuration of a command: a JSON file, or a data table (by its suffix, or whenever
    ``--config`` is given) with the configuration of ``--config`` (or the defaults) and, unless that configuration
    gives a grid, a grid fitted to the data (:mod:`bftcore.foundations.tables`)."""
    path, base = args.config, getattr(args, "with_config", None)
    if base is None and not str(path).lower().endswith(TABLE_SUFFIXES):
        return load_config(path)
    doc = read_document(base) if base is not None else None
    if doc is not None and not isinstance(doc, dict):
        raise ConfigError(f"{base}: the configuration must be a JSON object")
    table, labels = read_labelled_table(path)
    doc = data_document(table, doc, labels)
    if args.command == "fit":
        doc = by_evidence(doc)
    return validate_config(doc)


TLS_OPTIONS = ("--tls-ca-file", "--tls-cert", "--tls-key")


def _tls_options(parser: argparse.ArgumentParser) -> None:
    """The cluster's certificates for a ``tls://`` ``--scheduler`` (deploy/dask-cluster.sh --tls prints them)."""
    for flag, what in zip(TLS_OPTIONS, ("the cluster's certificate authority", "this client's certificate",
                                        "this client's private key")):
        parser.add_argument(flag, metavar="FILE.pem", help=f"with a tls:// --scheduler: {what} (PEM)")


def _tls(args):
    """The certificates of --tls-ca-file, --tls-cert and --tls-key in force for the run (all three, and only with a
    tls:// --scheduler); nothing without them."""
    files = [getattr(args, flag[2:].replace("-", "_"), None) for flag in TLS_OPTIONS]
    if not any(files):
        return contextlib.nullcontext()
    if not str(getattr(args, "scheduler", None) or "").startswith("tls://"):
        raise ConfigError("--tls-ca-file, --tls-cert and --tls-key go with a tls:// --scheduler address")
    if not all(files):
        raise ConfigError("a tls:// --scheduler needs all three of --tls-ca-file, --tls-cert and --tls-key")
    return using_tls(*files)


def _run_config(args, cfg) -> tuple[dict, str]:
    robust = kind_of(cfg) is ROBUST_REGRESSION
    if robust and (getattr(args, "png", None) is not None or getattr(args, "csv", None) is not None):
        raise ConfigError("--png and --csv draw and tabulate the Gaussian fits (with their exact posterior); a robust "
                          "regression's result is the JSON document (--json): its h on the x nodes")
    if args.command == "fit":
        return api.fit(cfg), "fit"
    if kind_of(cfg) is ROBUST_DENSITY:  # its sweeps, evidence and resampling are the Gaussian density's
        raise ConfigError(f"{args.command} is not defined for a density with a prior potential (prior.potential or "
                          f"solver.method \"irls\"): only fit is; remove those keys for the Gaussian density's "
                          f"{args.command}")
    if robust:  # its sweeps, evidence and resampling are Gaussian regression's
        raise ConfigError(f"{args.command} is not defined for a robust regression (a document with prior.potential, "
                          f"data_term or solver.method \"irls\"): only fit is; remove those keys for the Gaussian "
                          f"regression's {args.command}")
    if args.command == "evidence":
        given = [(name, text) for name, text in (("lambda", args.lam), ("l0", args.l0), ("l2", args.l2),
                                                 ("l4", args.l4), ("l6", args.l6), ("beta", args.beta))
                 if text is not None]
        if len(given) > 1:
            raise ConfigError("give one of --lambda, --l0, --l2, --l4, --l6, --beta: the path follows one "
                              "hyperparameter")
        name, text = given[0] if given else ("lambda", None)
        values = None if text is None else _evidence_values(text, f"--{name}", kind_of(cfg).nodes(cfg))
        return api.evidence_document(cfg, name, values), "evidence"
    if args.command == "learning-curve":
        parse_scheduler(args.scheduler)
        return api.learning_curve_document(cfg, parse_sizes(args.n), args.resamples, _lambda_values(args.lam),
                                           evidence=args.evidence, mode=args.mode, seed=args.seed,
                                           scheduler=args.scheduler,
                                           progress=_progress(args, "learning curve")), "learning-curve"
    if args.command == "bootstrap":
        parse_scheduler(args.scheduler)
        return api.bootstrap_document(cfg, args.resamples, args.level, args.seed, args.scheduler,
                                      progress=_progress(args, "bootstrap")), "bootstrap"
    if args.command in ("sweep", "basins"):
        parse_scheduler(args.scheduler)
    if args.command == "sweep":
        lo, hi, n = validate_sweep(cfg, *_beta_range(args.beta))
        return api.sweep_document(cfg, lo, hi, n, spacing=args.spacing, scheduler=args.scheduler), "sweep"
    return api.basins_document(cfg, scheduler=args.scheduler), "basins"


def main(argv=None) -> int:
    common = _Parser(add_help=False)
    common.add_argument("--config", dest="with_config", metavar="CONFIG.json",
                        help="with a data table as the file: the configuration (model, prior, solver; a grid of "
                             "its own or none, to fit one to the data) to use with it")
    common.add_argument("--no-limits", action="store_true",
                        help="lift the cost budget (grid size, iterations, time) for your own machine; the checks "
                             "of finite numbers and conditioning stay")
    parser = _Parser(prog="python -m bftcore", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    data_help = ("CONFIG.json, or a data table (.csv, .tsv, .txt, .dat: one column y, or two x y) whose grid is "
                 "fitted to the data")
    export = _Parser(add_help=False)
    export.add_argument("--csv", metavar="PREFIX", help="also write the results as CSV tables PREFIX_*.csv")
    export.add_argument("--png", metavar="FILE.png", help="also draw the results as a PNG figure")
    p = sub.add_parser("fit", parents=[common, export], help="fit the configuration in a JSON file (or your data "
                       "in a CSV table) and print the result")
    p.add_argument("config", help=data_help)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("reproduce", help="run a paper preset, or a real data set in its own units, or compute a "
                       "small figure: " + ", ".join(REPRODUCIBLE))
    p.add_argument("name", nargs="?")
    p.add_argument("--list", action="store_true", help="list every name with its paper and figure")
    p.add_argument("--png", metavar="FILE.png", help="also draw the figure as a PNG (not fig7)")
    p.add_argument("--full-size", action="store_true", help="image_completion: the paper's 180 x 240 images "
                   "instead of the tests' 90 x 120 (about four times the time)")
    p.add_argument("--json", action="store_true")
    parallel = _Parser(add_help=False)
    parallel.add_argument("--scheduler", metavar="ADDR", default="serial",
                          help="serial (default: one solve after another here), inprocess, local[:N] (a Dask "
                               "LocalCluster of N worker processes) or a running Dask scheduler, tcp://host:8786: "
                               "independent solves (basins' starts, a sweep's down branches) side by side")
    _tls_options(parallel)
    p = sub.add_parser("sweep", parents=[common, parallel], help="beta sweep up and down with continuation")
    p.add_argument("config")
    p.add_argument("--beta", required=True, help="MIN:MAX:N")
    p.add_argument("--spacing", choices=["linear", "log"], default="linear",
                   help="betas evenly spaced (linear, the default) or evenly spaced in ln beta (log)")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("basins", parents=[common, parallel],
                       help="solve from several starts and list the distinct minima")
    p.add_argument("config")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("evidence", parents=[common],
                       help="the log evidence along lambda (or --l0, --beta) and its maximum")
    p.add_argument("config")
    p.add_argument("--lambda", dest="lam", metavar="MIN:MAX:N", help="log-spaced lambda values (default: the "
                   "model's own range)")
    p.add_argument("--l0", metavar="MIN:MAX:N", help="follow the prior mass l0 instead")
    for order in ("l2", "l4", "l6"):
        p.add_argument(f"--{order}", metavar="MIN:MAX:N", help=f"follow the order coefficient {order} (density)")
    p.add_argument("--beta", metavar="MIN:MAX:N", help="follow beta, the inverse noise variance (regression)")
    p.add_argument("--json", action="store_true")
    engine = _Parser(add_help=False)
    engine.add_argument("--scheduler", metavar="ADDR", default=None,
                        help="where the fits run: serial (default), inprocess, local[:N] (a Dask LocalCluster of N "
                             "worker processes) or a running Dask scheduler, e.g. tcp://host:8786")
    _tls_options(engine)
    engine.add_argument("--seed", type=at_least(0), default=0, help="the seed of the resamples (default 0); the same "
                        "seed gives the same document on every scheduler")
    engine.add_argument("--progress", action="store_true", help="draw the progress bar on stderr even when it is "
                        "not a terminal")
    p = sub.add_parser("learning-curve", parents=[common, engine, export],
                       help="train and test error against the number of data n, by resampling (teacher mode from "
                            "the document's truth, else the bootstrap of its data)")
    p.add_argument("config", help=data_help)
    p.add_argument("--n", required=True, metavar="LO:HI:K", help="K sizes from LO to HI, log-spaced (add :linear "
                   "for even spacing)")
    p.add_argument("--resamples", type=at_least(1), default=20, help="data sets per size (default 20)")
    p.add_argument("--lambda", dest="lam", metavar="MIN:MAX:N", help="the lambda values compared (log-spaced; "
                   "default: the document's lambda times 1/4, 1/2, 1, 2, 4)")
    p.add_argument("--evidence", action="store_true", help="also fit each data set at its own evidence-chosen "
                   "lambda (the headline curve then)")
    p.add_argument("--mode", choices=["teacher", "bootstrap"], help="teacher: fresh data from the truth; "
                   "bootstrap: resample the document's data (default: teacher when there is a truth)")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("bootstrap", parents=[common, engine, export],
                       help="bootstrap bands on h(x) (and P): the data resampled with replacement and refitted")
    p.add_argument("config", help=data_help)
    p.add_argument("--resamples", type=at_least(2), default=50, help="resamples (default 50)")
    p.add_argument("--level", type=_fraction, default=0.9, help="the central band's probability (default 0.9)")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("replica", help="replica learning curves of GP regression on a table of d-dimensional "
                       "inputs (seed 002): theory and bootstrap simulation against m",
                       description=REPLICA_DESCRIPTION)
    p.add_argument("table", help="a CSV table (comma, semicolon, tab or spaces) whose first line names the columns")
    p.add_argument("--target", required=True, metavar="COLUMN", help="the column to predict; every other column is "
                   "an input")
    p.add_argument("--l2", type=float, required=True, help="the kernel's l^2 (Boston 147.1, Abalone 10)")
    p.add_argument("--noise", type=float, required=True, metavar="S2", help="the noise variance sigma^2, in units "
                   "of the standardised target's variance (Boston 0.01, Abalone 0.1)")
    p.add_argument("--sizes", required=True, metavar="A:B:N", help="N sizes m from A to B, log-spaced (add :linear "
                   "for even spacing); m may exceed the number of rows")
    p.add_argument("--scales", choices=replica_tables.SCALES, default="sqrt-var",
                   help="v_i of each input column, from the normalised column (--inputs): sqrt-var (the square root "
                        "of its variance, the paper's Boston choice; the default), var (its variance, Abalone) or ones")
    p.add_argument("--inputs", choices=replica_tables.INPUTS, default=replica_tables.INPUTS[0],
                   help="how each input column is normalised before its scale: range (onto [0, 1] by its minimum and "
                        "maximum; the default: no curve then depends on a column's units, and the theory meets the "
                        "simulation on Boston as the paper says), standard (mean 0, sd 1) or raw (as in the file)")
    p.add_argument("--one-hot", action="append", metavar="COLUMN", help="encode a categorical column as one 0/1 "
                   "input per level (levels sorted: sex -> sex=F, sex=I, sex=M); repeat for several; any other "
                   "column that is not numbers is refused")
    p.add_argument("--halves", action="store_true", help="also run the first and the second half of the rows as "
                   "data sets of their own (inputs normalised and scaled over the half's rows; the target keeps the "
                   "whole table's standardisation), as Fig 1 of the paper")
    p.add_argument("--split", choices=replica_tables.SPLITS, default=replica_tables.SPLITS[0],
                   help="how --halves cuts the rows: order (rows 1..N/2 and the rest, the paper's; the default) or "
                        "random (a random half, from --seed)")
    p.add_argument("--subset", type=at_least(2), metavar="N", help="also the theory of random subsets of N rows drawn "
                   "without replacement (Fig 2: 2000 and 1000 of Abalone's 4177), each normalised and scaled over its "
                   "own rows, the target standardised over the whole table: rows of part 'random N rows' with the "
                   "mean and the range over --repeats subsets")
    p.add_argument("--repeats", type=at_least(1), default=20, help="subsets of --subset (default 20, as Fig 2's bars)")
    p.add_argument("--resamples", type=at_least(2), default=replica_tables.RESAMPLES,
                   help=f"simulated training sets a size (default {replica_tables.RESAMPLES})")
    p.add_argument("--seed", type=at_least(0), default=0, help="the seed of the resamples (default 0)")
    p.add_argument("--png", metavar="FILE.png", help="also draw the curves (variance and error against m) as a PNG")
    p.add_argument("--progress", action="store_true", help="draw the progress bar on stderr even when it is not a "
                   "terminal")
    p.add_argument("--no-limits", action="store_true", help="lift the limits of rows, columns and time for your own "
                   "machine (Abalone's 4 177 rows take minutes)")
    p.add_argument("--json", action="store_true", help="machine-readable output: rows (one per m and part, with m, "
                   "part, N, theory_variance, simulated_variance, theory_error, simulated_error and the simulation's "
                   "standard errors) and the settings")
    p = sub.add_parser("bench", help="the Newton benchmark (issue 31): bftcore against L-BFGS-B and a sparse-direct "
                       "Newton floor on the paper mesh and n x n grids, priors l2 and l6, with growth exponents")
    p.add_argument("--repeats", type=at_least(1), default=3, help="runs per case, the median is printed (default 3)")
    p.add_argument("--sizes", default=None, metavar="S1,S2,...",
                   help=f"comma-separated sizes, n (an n x n grid) or NXxNY, for every family (default: "
                        f"{','.join(bench.SIZES)} for the grid family, whose 10x15 is the paper mesh of Figs 14 and "
                        f"16; {','.join(bench.DEFAULT_SIZES['refined'])} for the refined family)")
    p.add_argument("--lbfgs-max", type=float, default=10.0, metavar="SECONDS",
                   help="stop L-BFGS-B after this many seconds, or twice bftcore's fit if that is longer; its time is "
                        "then printed with '>' (default 10)")
    p.add_argument("--family", default=",".join(bench.FAMILIES), metavar="F1,F2",
                   help="problem families, comma-separated (default grid,refined): grid = the paper mesh and "
                        "random_problem(n) on an n x n mesh of unit spacing (the problem grows with the grid); "
                        "refined = one problem (random_problem(--base)'s data, domain and priors) on an n x n grid")
    p.add_argument("--base", type=at_least(4), default=bench.REFINED_BASE, metavar="N",
                   help=f"the refined family's problem: random_problem(N), domain [1, N]^2 (default "
                        f"{bench.REFINED_BASE}, the grid family's {bench.REFINED_BASE} x {bench.REFINED_BASE} problem)")
    p.add_argument("--quick", action="store_true",
                   help="each family's smallest sizes (grid 10x15,16,32; refined 16,32), one run each (a smoke "
                        "test); not with --sizes")
    p.add_argument("--json", action="store_true", help="machine-readable output: rows (each with its family), "
                   "exponents (the grid family's) and exponents_refined")
    args = parser.parse_args(argv)
    if args.command == "bench":
        return _bench(args, parser)
    try:
        doc, kind = _run(args)
        summaries = {"fit": lambda d: _summary_fit(d, _document_of(args)), "sweep": _summary_sweep,
                     "basins": _summary_basins, "evidence": _summary_evidence, "learning-curve": _summary_learning,
                     "bootstrap": _summary_bootstrap, "list": _summary_list, "small-figure": _summary_small,
                     "replica": _summary_replica}
        text = _dump(doc) if args.json else summaries[kind](doc)
        with using(_limits(args)):  # the budget of outputs is the command's, as its inputs' (--no-limits)
            written = _export(args, kind, doc)
    except (ConfigError, SingularOperatorError, RunBudgetExceeded, ValueError, Cancelled) as e:
        return _fail(e)
    except MemoryError:
        return _fail("out of memory; use a coarser grid or fewer templates")
    except RecursionError:
        return _fail("the input is nested too deeply")
    except OSError as e:
        return _fail(f"{e.strerror or e}" + (f": {e.filename}" if getattr(e, "filename", None) else ""))
    except Exception as e:  # noqa: BLE001 - a bug, not the user's input: still one line, and a distinct status
        print(f"error: internal error ({type(e).__name__}: {_one_line(e)}); please report it with the input",
              file=sys.stderr)
        return 1
    print(text)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _bench(args, parser) -> int:
    """``python -m bftcore bench``: measure and print the table (:mod:`bftcore.studies.bench`)."""
    if args.quick and args.sizes is not None:  # --quick used to drop --sizes silently
        parser.error("bench: --quick runs its own sizes (grid 10x15,16,32; refined 16,32); give --quick or --sizes, "
                     "not both")
    sizes = None if args.quick or args.sizes is None else \
        tuple(t.strip() for t in args.sizes.split(",") if t.strip())
    repeats = 1 if args.quick else args.repeats
    if sizes == ():
        parser.error("bench: --sizes is empty; give sizes such as 16,32,10x15")
    for text in sizes or ():
        try:
            bench.parse_size(text)
        except ValueError as e:
            parser.error(f"bench: {e}")
    if not (math.isfinite(args.lbfgs_max) and args.lbfgs_max > 0):
        parser.error(f"bench: --lbfgs-max must be a positive number of seconds, got {args.lbfgs_max}")
    families = tuple(dict.fromkeys(t.strip() for t in args.family.split(",") if t.strip()))
    unknown = [f for f in families if f not in bench.FAMILIES]
    if not families or unknown:
        parser.error(f"bench: --family {args.family!r}: give one or more of {','.join(bench.FAMILIES)}")
    if args.base > 512:
        parser.error(f"bench: --base {args.base}: give a problem size between 4 and 512")
    rows = bench.run(bench.QUICK_SIZES if args.quick else sizes, repeats=repeats, lbfgs_max_s=args.lbfgs_max,
                     families=families, base=args.base)
    if args.json:
        print(_dump({"rows": rows, "exponents": bench.exponents(rows, "grid"),
                     "exponents_refined": bench.exponents(rows, "refined"), "families": list(families),
                     "base": args.base, "repeats": repeats, "lbfgs_max_s": args.lbfgs_max}))
    else:
        print(bench.table(rows, repeats, args.lbfgs_max, args.base))
    return 0


def _export(args, kind: str, doc: dict) -> list[str]:
    """The files of ``--csv PREFIX`` (:mod:`bftcore.outputs.result_tables`) and ``--png FILE``
    (:mod:`bftcore.outputs.figures`), checked before anything is written: a missing folder is a user error."""
    csv_prefix, png = getattr(args, "csv", None), getattr(args, "png", None)
    if csv_prefix is None and png is None:
        return []
    if kind == "small-figure" and png is not None:
        return [_write_png(png, figures.small_figure_png(SMALL_FIGURES[args.name].drawer, doc))]
    if kind == "replica" and png is not None:
        return [_write_png(png, figures.small_figure_png("curves", doc))]
    cfg = args.document
    tables: dict[str, str] | str
    if kind == "fit":
        tables, figure = result_tables.fit_tables(cfg, doc), (figures.fit_png(cfg, doc) if png else None)
    elif kind == "learning-curve":
        tables, figure = result_tables.learning_curve_table(doc), (figures.learning_curve_png(doc) if png else None)
    else:
        tables, figure = result_tables.bootstrap_tables(cfg, doc), (figures.bootstrap_png(cfg, doc) if png else None)
    written = export.write_outputs(csv_prefix, tables, None) if csv_prefix else []
    if png:
        written.append(_write_png(png, figure))
    return written


def _check_outputs(args) -> None:
    """Refuse ``--png`` / ``--csv`` targets that cannot be written, before any fit runs."""
    png, prefix = getattr(args, "png", None), getattr(args, "csv", None)
    if png is not None:
        if not str(png).lower().endswith(".png"):
            raise ConfigError(f"--png takes a file name ending in .png, got {png!r}")
        folder = os.path.dirname(os.path.abspath(png))
        if not os.path.isdir(folder):
            raise ConfigError(f"--png {png}: the folder {folder} does not exist; create it or write elsewhere")
        try:
            export.refuse_special_target(png)  # a named pipe would block the write after the whole fit
        except ValueError as e:
            raise ConfigError(f"--png {e}") from None
    if prefix is not None:
        folder = os.path.dirname(os.path.abspath(prefix))
        if os.path.isdir(prefix) or not os.path.isdir(folder):
            raise ConfigError(f"--csv {prefix}: give a file name prefix in an existing folder, e.g. results/run1 "
                              f"(writes results/run1_P.csv, ...)")


def _write_png(path: str, data) -> str:
    with open(path, "wb") as fh:
        fh.write(data)
    return str(path)


def _one_line(e) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 400 else text[:400] + "..."


def _fail(e) -> int:
    print(f"error: {_one_line(e)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
