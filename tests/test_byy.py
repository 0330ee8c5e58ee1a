"""BYY harmony learning of a 1-D mixture (bftcore.models.byy, issue 30 part 2): the gradient (9) against finite
differences of H, H non-decreasing along the flow and the quasi-Newton's iterates, pruning where the hard-cut
"assign, then refit" loop splits clusters, ML against an independent EM, units equivariance, and the demo's
criterion (harmony keeps no more components than ML in every seed, median 3)."""
import numpy as np
import pytest
from scipy.special import softmax

from bftcore.models import byy


def three_clusters(seed, centres=(-4.0, 0.0, 4.0), width=1.0, n=100):
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.normal(m, width, n) for m in centres])


def theta_of(m: byy.Mixture) -> np.ndarray:
    return np.concatenate([np.log(m.weights), m.means, np.log(m.widths)])


@pytest.mark.parametrize("objective", byy.OBJECTIVES)
def test_the_gradient_of_9_is_the_finite_difference_of_the_objective(objective):
    rng = np.random.default_rng(4)
    x = three_clusters(1)[::7]
    theta = np.concatenate([rng.normal(0, 1, 5), rng.normal(0, 3, 5), rng.normal(0, 0.4, 5)])
    value, grad = byy.objective_and_gradient(objective, theta, x)
    h = 1e-6
    fd = np.array([(byy.objective_and_gradient(objective, theta + h * e, x)[0]
                    - byy.objective_and_gradient(objective, theta - h * e, x)[0]) / (2 * h) for e in np.eye(15)])
    assert np.allclose(grad, fd, rtol=1e-6, atol=1e-8)
    # the value is the module's H (or mean log-likelihood) of the same mixture: one formula, two routes
    mix = byy.Mixture(softmax(theta[:5]), theta[5:10], np.exp(theta[10:]))
    other = byy.harmony(mix, x) if objective == "harmony" else byy.log_likelihood(mix, x)
    assert value == pytest.approx(other, rel=1e-12)


def test_harmony_is_the_likelihood_minus_the_entropy_of_the_responsibilities():
    """Lemm's -ln sum e^{-E} = sum a E - H(a) at a = the responsibilities: ML = harmony + entropy, per sample."""
    x = three_clusters(2)
    m = byy.quantile_start(x, 6)
    p = byy.responsibilities(m, x)
    entropy = -np.sum(p * np.log(p)) / x.size
    assert byy.log_likelihood(m, x) == pytest.approx(byy.harmony(m, x) + entropy, rel=1e-12)


@pytest.mark.parametrize("objective", byy.OBJECTIVES)
def test_the_objective_never_decreases_along_the_flow_and_the_quasi_newton_stages(objective):
    x = three_clusters(3)
    flow = byy.gradient_flow(x, objective, steps=150)
    assert np.all(np.diff(flow.history) >= -1e-12)
    assert flow.history[-1] > flow.history[0] + 0.05
    fit = byy.fit_mixture(x, objective)
    bounds = fit.stages[1:] + [len(fit.history)]
    for a, b in zip(fit.stages, bounds):
        assert np.all(np.diff(fit.history[a:b]) >= -1e-10), (a, b)
    # a deletion is kept only when it raises the objective: never below the fit without model selection (the
    # threshold pruning alone may lower it: a pruned sharp component can carry harmony)
    assert fit.history[-1] >= byy.fit_mixture(x, objective, select=False).history[-1] - 1e-10
    # the history is in the data's units: its end is the objective of the fitted mixture
    final = byy.harmony(fit.mixture, x) if objective == "harmony" else byy.log_likelihood(fit.mixture, x)
    assert fit.history[-1] == pytest.approx(final, abs=1e-9)


def hard_cut(x, start: byy.Mixture, steps=200):
    """The reference the issue says is *not* harmony learning: Yang argmax (winner take all), then Ying refit
    (classification EM), with an empty cluster dropped."""
    w, mu, sd = start.weights.copy(), start.means.copy(), start.widths.copy()
    for _ in range(steps):
        label = np.argmax(byy.log_components(byy.Mixture(w, mu, sd), x), axis=0)
        used = np.unique(label)
        w = np.array([np.mean(label == j) for j in used])
        mu = np.array([x[label == j].mean() for j in used])
        sd = np.array([max(x[label == j].std(), 1e-3) for j in used])
    return byy.Mixture(w, mu, sd)


def test_harmony_prunes_to_three_on_well_separated_data_where_the_hard_cut_loop_splits_clusters():
    x = three_clusters(0, centres=(-8.0, 0.0, 8.0), width=1.0)
    start = byy.quantile_start(x, 6)
    fit = byy.fit_mixture(x, "harmony", start=start)
    assert fit.mixture.weights.size == 3 and fit.kept == 3
    assert np.allclose(np.sort(fit.mixture.means), [-8, 0, 8], atol=0.3)
    assert np.allclose(fit.mixture.weights, 1 / 3, atol=0.05)
    # the weights of the pruned components went to zero in the history, the kept ones to 1/3
    final = fit.weights_history[-1]
    assert np.sum(final > 0) == 3 and final.size == 6
    cut = hard_cut(x, start)
    assert byy.kept(cut) == 6    # it splits each cluster in two
    ml = byy.fit_mixture(x, "ml", start=start)
    assert ml.kept > 3


def em(x, start: byy.Mixture, steps=20000, tol=1e-13):
    """An independent ML: the textbook EM for a 1-D Gaussian mixture."""
    w, mu, sd = start.weights.copy(), start.means.copy(), start.widths.copy()
    for _ in range(steps):
        logp = np.log(w)[:, None] - np.log(sd)[:, None] - 0.5 * ((x[None, :] - mu[:, None]) / sd[:, None]) ** 2
        r = softmax(logp, axis=0)
        nk = r.sum(axis=1)
        new = (nk / x.size, r @ x / nk)
        sd_new = np.sqrt(np.sum(r * (x[None, :] - new[1][:, None]) ** 2, axis=1) / nk)
        done = max(np.max(np.abs(new[1] - mu)), np.max(np.abs(sd_new - sd)), np.max(np.abs(new[0] - w))) < tol
        w, mu, sd = new[0], new[1], sd_new
        if done:
            break
    return byy.Mixture(w, mu, sd)


def test_the_ml_baseline_is_the_em_solution():
    x = three_clusters(5)
    start = byy.quantile_start(x, 3)
    ml = byy.fit_mixture(x, "ml", start=start, select=False, gtol=1e-10)
    ref = em(x, start)
    assert np.allclose(ml.mixture.means, ref.means, atol=1e-5)
    assert np.allclose(ml.mixture.widths, ref.widths, atol=1e-5)
    assert np.allclose(ml.mixture.weights, ref.weights, atol=1e-6)
    # the six-component baseline is a fixed point of EM (the likelihood is flat along the shared clusters, so it
    # is compared by EM steps from it, not by a second run from the start)
    six = byy.fit_mixture(x, "ml", gtol=1e-10).mixture
    again = em(x, six, steps=50, tol=0)
    assert byy.log_likelihood(again, x) - byy.log_likelihood(six, x) < 1e-8
    assert np.allclose(again.means, six.means, atol=5e-3)


@pytest.mark.parametrize("c, d", [(2.5, -3.0), (-0.5, 7.0)])
@pytest.mark.parametrize("objective", byy.OBJECTIVES)
def test_rescaled_data_give_the_rescaled_mixture(objective, c, d):
    x = three_clusters(6)
    fit = byy.fit_mixture(x, objective).mixture
    other = byy.fit_mixture(c * x + d, objective).mixture
    order, order2 = np.argsort(fit.means * np.sign(c)), np.argsort(other.means)
    assert np.allclose(other.means[order2], c * fit.means[order] + d, rtol=1e-5, atol=1e-5 * abs(c))
    assert np.allclose(other.widths[order2], abs(c) * fit.widths[order], rtol=1e-5)
    assert np.allclose(other.weights[order2], fit.weights[order], atol=1e-6)
    y = np.linspace(-8, 8, 9)
    assert np.allclose(other.density(c * y + d) * abs(c), fit.density(y), rtol=1e-4)


def test_harmony_keeps_no_more_components_than_ml_in_every_seed_and_three_in_the_median():
    counts = [(byy.fit_mixture(x, "harmony").kept, byy.fit_mixture(x, "ml").kept)
              for x in map(three_clusters, range(10))]
    assert all(h <= m for h, m in counts), counts
    assert np.median([h for h, _ in counts]) == 3, counts
    assert np.median([m for _, m in counts]) > 3, counts


def test_errors_say_what_was_wrong():
    with pytest.raises(ValueError, match="unknown objective 'kl'; choose one of harmony, ml"):
        byy.fit_mixture([0.0, 1.0, 2.0], "kl")
    with pytest.raises(ValueError, match="one-dimensional samples"):
        byy.fit_mixture(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="all samples are equal"):
        byy.fit_mixture([1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"pruning threshold must be in \[0, 1\)"):
        byy.fit_mixture([0.0, 1.0, 2.0], prune=1.5)


def test_reproduce_byy_is_listed_and_its_document_holds_counts_fits_and_held_out_losses(capsys):
    from bftcore.__main__ import main
    from bftcore.studies import byy_demo
    assert main(["reproduce", "--list"]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("byy "))
    assert line.split(None, 1)[1].startswith("004 (Xu, BYY) appendix: ")  # the name column's width is the list's
    doc = byy_demo.byy_document(seeds=(7,))
    row = doc["seeds"][0]
    assert row["seed"] == 7 and row["harmony_components"] == 3 and row["ml_components"] >= 3
    fit = byy.Mixture(*(np.array(row["harmony"][k]) for k in ("weights", "means", "widths")))
    test = byy_demo.heldout()
    assert row["held_out_log_loss"]["harmony"] == pytest.approx(-np.mean(fit.log_density(test)), rel=1e-12)
    # no fitted density beats the truth on 10^4 held-out samples by more than sampling noise; all are close to it
    floor = doc["summary"]["true_held_out_log_loss"]
    for loss in row["held_out_log_loss"].values():
        assert floor - 0.02 < loss < floor + 0.1
    assert 0 < row["bft_lambda"] < np.inf
    assert [p["title"] for p in doc["panels"]][1:] == ["seed 7: harmony weights over the iterations",
                                                       "seed 7: ML weights over the iterations"]
