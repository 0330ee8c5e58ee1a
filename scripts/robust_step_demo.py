"""The step-with-outlier demo of Sects. 6.5 and 3.7.4: ``python scripts/robust_step_demo.py`` prints one row per case
of :func:`bftcore.models.robust.step_cases` (data term, prior potential, lambda; decisions in its docstring): RMSE to
the true step, the fit at x = 0.19, 0.2, 0.21 (the outlier y = 3 sits at 0.2, next to a regular datum), the largest
edge difference within 2 cells of the jump at 0.5, iterations and the solver's verdict."""
from __future__ import annotations

from bftcore.models.robust import step_cases, step_demo


def main() -> None:
    cases = step_cases()
    rows = step_demo()
    print(f"{'case':16s} {'data term':12s} {'potential':10s} {'lambda':>7s} {'rmse':>7s} {'h(.19)':>7s} "
          f"{'h(.20)':>7s} {'h(.21)':>7s} {'jump':>6s} {'iter':>5s}  verdict")
    for name, r in rows.items():
        rho, psi, lam = cases[name]
        print(f"{name:16s} {rho.name:12s} {psi.name:10s} {lam:7.3g} {r['rmse']:7.4f} {r['h_019']:7.3f} "
              f"{r['h_020']:7.3f} {r['h_021']:7.3f} {r['jump']:6.3f} {r['iterations']:5d}  {r['verdict'][:60]}")


if __name__ == "__main__":
    main()
