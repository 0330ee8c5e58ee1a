"""The step demo of issue 29 for the local priors (bftcore.models.local_priors): a unit step at x = 0.5 on 101
nodes of [0, 1], 40 noisy points (sigma = 0.1, numpy's default_rng(0): the nodes, then the noise), fitted by the
best single Gaussian prior of a lambda scan (the lowest RMSE to the truth over 51 values of 1e-4..10), by the local
mixture (filter switching, kappa = (0.1, 1e-4) per edge, pi_soft = 0.05, beta = 1, started from the Gaussian fit at
lambda = 0.01) and by the log-stiffness hyperfield (theta_0 = ln 0.1, gamma_theta = mu_theta = 1).  Prints one line
per fit: its RMSE to the truth and the edges that opened (a_soft > 0.5; e^theta under a tenth of its median).

    python scripts/local_step_demo.py
"""
import time

import numpy as np

from bftcore.foundations.grid import Axis
from bftcore.models.local_priors import hyperfield_fit, local_mixture_fit
from bftcore.models.regression import RegressionModel

AXIS = Axis(0.0, 1.0, 101, "neumann")


def main() -> None:
    rng = np.random.default_rng(0)
    idx = rng.choice(101, 40, replace=False)
    truth = (AXIS.nodes > 0.5).astype(float)
    x, y = AXIS.nodes[idx], truth[idx] + 0.1 * rng.standard_normal(40)

    def rmse(phi):
        return float(np.sqrt(np.mean((phi - truth) ** 2)))
    lams = np.logspace(-4, 1, 51)
    gauss = [rmse(RegressionModel(AXIS, np.column_stack([x, y]), [{"kind": "constant", "value": 0.0}], lam=lam,
                                  l2=1.0).component_solutions[0]) for lam in lams]
    k = int(np.argmin(gauss))
    print(f"best single Gaussian   RMSE {gauss[k]:.4f}  (lambda = {lams[k]:.4g} of 51 in 1e-4..10)")
    start = local_mixture_fit(x, y, AXIS, 0.1, [0.01], [1.0]).phi
    t0 = time.perf_counter()
    mix = local_mixture_fit(x, y, AXIS, 0.1, (0.1, 1e-4), (0.95, 0.05), beta=1.0, init=start)
    t1 = time.perf_counter()
    print(f"local mixture          RMSE {rmse(mix.phi):.4f}  opened at x = {np.round(mix.edge_x[mix.a[1] > 0.5], 3)}"
          f"  ({mix.iterations} sweeps, {1e3 * (t1 - t0):.1f} ms)")
    t0 = time.perf_counter()
    hf = hyperfield_fit(x, y, AXIS, 0.1, theta0=np.log(0.1), gamma_theta=1.0, mu_theta=1.0)
    t1 = time.perf_counter()
    soft = hf.edge_x[hf.stiffness < 0.1 * np.median(hf.stiffness)]
    print(f"hyperfield             RMSE {rmse(hf.phi):.4f}  soft at x = {np.round(soft, 3)}"
          f"  ({hf.iterations} iterations, {1e3 * (t1 - t0):.0f} ms)")


if __name__ == "__main__":
    main()
