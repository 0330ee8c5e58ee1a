"""Command line: ``python -m bftcore fit|reproduce|sweep|basins|bench`` (CONVENTIONS.md §4).

User errors (bad files, bad keys, points off the grid, a singular operator, ...) print one line naming the problem
on stderr and exit with status 2; they never print a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from .config import ConfigError, load_config
from .operators import SingularOperatorError

FIGURES = [f"fig{k}" for k in (14, 15, 16, 17, 21, 22, 23, 24, 25, 26, 27, 28)]


def _dump(doc) -> str:
    return json.dumps(doc, allow_nan=False, default=lambda o: o.tolist() if isinstance(o, np.ndarray) else float(o))


def _summary_fit(doc: dict) -> str:
    lines = [f"model {doc.get('model')}" + (f", field {doc['field']}" if "field" in doc else ""),
             f"energy        {doc['energy']:.10g}",
             f"train error   {doc['train_error']:.6g}" if doc.get("train_error") is not None else "train error   -",
             f"test error    {doc['test_error']:.6g}" if doc.get("test_error") is not None else "test error    -",
             f"iterations    {doc['iterations']} ({'converged' if doc['converged'] else 'not converged'})",
             f"mixing a_j    {', '.join(f'{a:.4g}' for a in doc['mixing'])}"]
    if "max_P" in doc:
        lines.insert(3, f"max P         {doc['max_P']:.6g}")
    if "exact" in doc:
        lines.append(f"exact b_j     {', '.join(f'{b:.4g}' for b in doc['exact']['b'])}")
    lines.append(f"solve time    {doc['elapsed_s'] * 1e3:.1f} ms")
    for n in doc.get("notes", []):
        lines.append(f"note: {n}")
    return "\n".join(lines)


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


def _beta_range(text: str):
    try:
        lo, hi, n = text.split(":")
        lo, hi, n = float(lo), float(hi), int(n)
    except ValueError:
        raise ConfigError(f"--beta must be MIN:MAX:N (e.g. 0.5:4:50), got {text!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and 0 < lo < hi and n >= 2):
        raise ConfigError(f"--beta needs 0 < MIN < MAX and N >= 2, got {text!r}")
    return lo, hi, n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bftcore", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("fit", help="fit the configuration in a JSON file and print the result document")
    p.add_argument("config")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("reproduce", help="run a paper preset: " + ", ".join(FIGURES + ["fig7"]))
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("sweep", help="beta sweep up and down with continuation")
    p.add_argument("config")
    p.add_argument("--beta", required=True, help="MIN:MAX:N")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("basins", help="solve from several starts and list the distinct minima")
    p.add_argument("config")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("bench", help="the performance benchmark (prints a table)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="skip the 128x128 cases")
    args = parser.parse_args(argv)
    try:
        if args.command == "bench":
            from .bench import main as bench_main
            return bench_main(repeats=args.repeats, quick=args.quick)
        from . import api, mixtures
        if args.command == "fit":
            doc, kind = api.fit(load_config(args.config)), "fit"
        elif args.command == "reproduce":
            if args.name == "fig7":
                doc, kind = mixtures.fig7_document(), "sweep"
            else:
                from .presets import figure_config
                doc, kind = api.fit(figure_config(args.name)), "fit"
        elif args.command == "sweep":
            lo, hi, n = _beta_range(args.beta)
            doc, kind = mixtures.sweep_document(load_config(args.config), lo, hi, n), "sweep"
        else:
            doc, kind = mixtures.basins_document(load_config(args.config)), "basins"
    except (ConfigError, SingularOperatorError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(_dump(doc))
    else:
        print({"fit": _summary_fit, "sweep": _summary_sweep, "basins": _summary_basins}[kind](doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
