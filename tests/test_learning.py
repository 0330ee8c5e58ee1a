"""Learning curves and bootstrap bands by real resampling (bftcore.studies.learning), each against an independent route:
closed forms of a prior without coupling between nodes (every node its own Gaussian), exact enumeration of
bootstrap draws, the truth's own distribution, and the same document from every engine
(bftcore.foundations.distributed)."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import binom

from bftcore import api
from bftcore.__main__ import main
from bftcore.foundations.config import ConfigError, validate_config
from bftcore.foundations.distributed import Cancelled, parse_scheduler, run_tasks
from bftcore.models.presets import figure_config
from bftcore.studies import learning

M, A_PRIOR, BETA = 5, 0.5, 4.0  # nodes, lambda hx l0 (the prior precision of a node), inverse noise variance
TRUTH = [0.0, 0.5, 1.0, 0.5, -0.25]


def diagonal_regression(data=None, truth=True) -> dict:
    """A regression whose prior couples no nodes (l0 only): node i's posterior is N(S_i / (a + n_i),
    1 / (beta (a + n_i))) with n_i data summing to S_i and a = lambda hx l0 = 0.5 (hx = 0.25)."""
    doc = {"model": "regression", "grid": {"x": {"min": 0, "max": 1, "n": M, "boundary": "neumann"}},
           "data": data or [], "prior": {"lambda": 1.0, "l0": 2.0, "l2": 0.0}, "beta": BETA,
           "templates": [{"kind": "constant", "value": 0}]}
    if truth:
        doc["truth"] = TRUTH
    return doc


def test_teacher_regression_matches_the_closed_form():
    """The mean over resamples of the posterior variance and of the test error at each n against their exact
    expectations over n_i ~ Binomial(n, 1/M): E[1/(beta(a+n_i))] and E[(n_i/beta + a^2 t_i^2)/(a+n_i)^2]/2."""
    sizes, R = [1, 4, 16], 300
    doc = learning.learning_curve_document(diagonal_regression(), sizes, R, lambdas=[1.0], scheduler="serial",
                                           replica=False)
    curve = doc["curves"][0]
    t = np.array(TRUTH)
    for i, n in enumerate(sizes):
        k = np.arange(n + 1)
        w = binom.pmf(k, n, 1.0 / M)
        var = float(np.sum(w / (BETA * (A_PRIOR + k))))
        err = float(np.mean([np.sum(w * (k / BETA + A_PRIOR ** 2 * ti ** 2) / (A_PRIOR + k) ** 2) for ti in t])) / 2
        pv, te = curve["posterior_variance"], curve["test_error"]
        # standard errors of the simulated means from their own spread
        assert abs(pv["mean"][i] - var) < 4 * pv["sd"][i] / math.sqrt(R) + 1e-12, (n, pv["mean"][i], var)
        assert abs(te["mean"][i] - err) < 4 * te["sd"][i] / math.sqrt(R), (n, te["mean"][i], err)
        assert te["count"][i] == R and curve["failed"][i] == 0


def test_bootstrap_unique_fraction_exact_and_sampled():
    """E[#distinct] = N (1 - (1 - 1/N)^m) against exact enumeration of all N^m draws, and the resampler's measured
    fraction against it."""
    for N, m in ((3, 4), (4, 3), (2, 5)):
        counts = [len(set(draw)) for draw in itertools.product(range(N), repeat=m)]
        assert np.mean(counts) == pytest.approx(learning.expected_unique(N, m), rel=1e-12)
    data = [[x, 0.3 * x] for x in np.linspace(0, 1, 12)]
    R = 150
    doc = learning.learning_curve_document(diagonal_regression(data, truth=False), [3, 12, 40], R,
                                           lambdas=[1.0], scheduler="serial", replica=False)
    assert doc["mode"] == "bootstrap"
    for mean, expected, m in zip(doc["unique_fraction"]["mean"], doc["unique_fraction"]["expected"], [3, 12, 40]):
        p = np.arange(1, 13) / 12  # fraction values; binomial-ish spread bound: sd <= 0.5/sqrt(12) per resample
        assert p.size and abs(mean - expected) < 4 * 0.5 / math.sqrt(12 * R), (m, mean, expected)
    # in-bag (train) error below out-of-bag (test) error: the optimism of the simple bootstrap
    tr, te = doc["train_error"]["mean"], doc["test_error"]["mean"]
    assert all(a < b for a, b in zip(tr, te))
    # all N in the bag: m = 40 from N = 12 leaves about 12 (1 - 1/12)^40 = 0.37 points out; counted resamples
    assert doc["test_error"]["count"][2] <= R


def test_teacher_density_draws_follow_the_truth():
    """The teacher's sampler: the histogram of many draws on the nodes against (708), normalised over y, with
    x uniform."""
    cfg = validate_config(figure_config("fig21"))
    draw = learning.truth_sampler(cfg)
    pts = draw(200_000, np.random.default_rng(5))
    from bftcore.foundations.config import grid_from_config
    from bftcore.foundations.templates import paper_true_density
    grid = grid_from_config(cfg)
    counts = grid.counts(pts) / len(pts)
    P = paper_true_density(grid)
    expected = P / P.sum(axis=1, keepdims=True) / grid.x.n
    se = np.sqrt(expected / len(pts))
    assert np.max(np.abs(counts - expected) / np.maximum(se, 1e-6)) < 5


def test_density_learning_curve_falls_and_best_lambda_per_n():
    doc = learning.learning_curve_document(figure_config("fig21"), [5, 40, 300], 8, scheduler="serial")
    te = doc["test_error"]["mean"]
    assert te[0] > te[1] > te[2] > 2.23 - 0.05  # falls towards the truth's own test error, 2.23
    assert doc["headline"] == "lambda=0.5" and len(doc["curves"]) == 5
    means = np.array([c["test_error"]["mean"] for c in doc["curves"]])
    assert doc["best_lambda"] == [doc["lambda"][int(j)] for j in np.argmin(means, axis=0)]
    assert all(sum(c["failed"]) == 0 and sum(c["unconverged"]) == 0 for c in doc["curves"])


def test_evidence_curve_uses_each_data_sets_own_lambda():
    cfg = diagonal_regression()
    cfg["prior"]["l2"] = 0.1
    doc = learning.learning_curve_document(cfg, [4, 30], 4, lambdas=[1.0], evidence=True, scheduler="serial",
                                           replica=False)
    assert doc["headline"] == "evidence"
    chosen = doc["curves"][-1]["chosen_lambda"]
    assert chosen["count"] == [4, 4]
    # each chosen lambda maximises that data set's exact evidence: recompute one by the evidence path
    task = {"cfg": learning.converging_solver(validate_config(cfg)), "mode": "teacher", "n": 30, "k": 1, "r": 0,
            "seed": 0, "lambdas": [1.0], "evidence": True}
    res = learning.resample_task(task)
    data = learning.truth_sampler(task["cfg"])(30, learning._seed_of(0, 1, 0))
    path = api.evidence_document({**cfg, "data": data.tolist()}, "lambda", np.geomspace(0.01, 100, 81))
    assert math.log(res["evidence"]["lambda"]) == pytest.approx(math.log(path["best"]["lambda"]), abs=0.06)


def test_partial_documents_fill_in_and_the_final_is_complete():
    seen = []
    doc = learning.learning_curve_document(figure_config("fig21"), [5, 20], 6, lambdas=[0.5], scheduler="serial",
                                           update=lambda d: seen.append(d))
    assert seen and seen[-1]["finished"] == 12 and doc["complete"] and not seen[0]["complete"]
    counts = [sum(d["test_error"]["count"]) for d in seen]
    assert counts == sorted(counts) and counts[-1] == 12


@pytest.mark.parametrize("scheduler", [None, "inprocess", "local:2"])
def test_every_engine_gives_the_serial_document(scheduler):
    """The same seed gives the same numbers by default, on Dask (in process, and a real LocalCluster of two worker
    processes) as the plain loop."""
    kw = dict(sizes=[5, 30], resamples=3, lambdas=[0.25, 1.0], seed=7)
    ref = learning.learning_curve_document(figure_config("fig21"), scheduler="serial", **kw)
    got = learning.learning_curve_document(figure_config("fig21"), scheduler=scheduler, **kw)
    for key in ("elapsed_s", "scheduler"):
        ref.pop(key), got.pop(key)
    assert json.dumps(got, sort_keys=True) == json.dumps(ref, sort_keys=True)
    cfg = diagonal_regression([[x, math.sin(3 * x)] for x in np.linspace(0, 1, 9)])
    b_ref = learning.bootstrap_document(cfg, 6, scheduler="serial", seed=3)
    b_got = learning.bootstrap_document(cfg, 6, scheduler=scheduler, seed=3)
    assert b_got["h_mean"] == b_ref["h_mean"] and b_got["h_lo"] == b_ref["h_lo"]


def test_a_running_cluster_reached_by_address_gives_the_serial_document_every_call():
    """:func:`running_cluster` keeps two worker processes up for several sweeps, reached as a scheduler by address
    (the route of a multi-machine cluster): the same numbers as the plain loop, call after call, chunked or not."""
    import dask

    from bftcore.foundations.distributed import QUIET, running_cluster
    kw = dict(sizes=[5, 30], resamples=3, lambdas=[0.25, 1.0], seed=7)
    ref = learning.learning_curve_document(figure_config("fig21"), scheduler="serial", **kw)
    ref.pop("elapsed_s"), ref.pop("scheduler")
    with running_cluster(2) as address:
        assert address.startswith("tcp://127.0.0.1:")
        for _ in range(2):
            got = learning.learning_curve_document(figure_config("fig21"), scheduler=address, **kw)
            assert got.pop("scheduler") == address
            got.pop("elapsed_s")
            assert json.dumps(got, sort_keys=True) == json.dumps(ref, sort_keys=True)
        assert run_tasks(abs, list(range(-100, 0)), address) == list(range(100, 0, -1))
        # the workers it starts run with Dask's background work slowed down (distributed.QUIET): they read it
        # from the configuration they were spawned with
        keys = sorted(QUIET)
        assert run_tasks(dask.config.get, keys, address) == [QUIET[k] for k in keys]


def test_tasks_go_in_chunks_equal_on_one_thread_and_shrinking_on_several():
    """Dask costs a few ms a task, so tasks travel in chunks.  On one worker thread: 8 equal strided chunks (the
    progress bar's steps), never more than the tasks.  On several: guided self-scheduling, each chunk half of what
    is left over the threads, down to a floor, every chunk spread over the list of tasks from cheap to dear; every
    task in exactly one chunk.  The in-process engine (one thread) reports progress once per chunk."""
    from bftcore.foundations.distributed import chunk_count, chunk_plan
    assert [chunk_count(160, 2), chunk_count(160, 1), chunk_count(1000, 16), chunk_count(5, 2), chunk_count(0, 2)] \
        == [8, 8, 64, 5, 1]
    assert chunk_plan(160, 1) == [list(range(j, 160, 8)) for j in range(8)]
    plan = chunk_plan(160, 2)
    assert [len(c) for c in plan] == [40, 30, 23, 17, 13, 10, 10, 10, 7]
    for tasks, threads in itertools.product([1, 2, 5, 7, 160, 1000], [1, 2, 3, 16]):
        flat = sorted(i for chunk in chunk_plan(tasks, threads) for i in chunk)
        assert flat == list(range(tasks))
    # the README curve lists its 160 resamples by size n, cheap to dear: every chunk of 10 or more draws from both
    # halves of the list, its mean index within a tenth of the list's middle
    assert all(abs(np.mean(c) - 79.5) < 16 and min(c) < 80 <= max(c) for c in plan if len(c) >= 10)
    seen = []
    assert run_tasks(abs, list(range(-100, 0)), "inprocess", progress=lambda d, t: seen.append(d)) \
        == list(range(100, 0, -1))
    assert len(seen) == 8 and seen[-1] == 100 and seen == sorted(seen)


def test_progress_and_cancel():
    seen = []
    run_tasks(abs, [-1, -2, -3, -4], "inprocess", progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (4, 4) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    calls = []

    def cancel():
        return len(calls) >= 2

    for sch in ("serial", "inprocess"):
        calls.clear()
        with pytest.raises(Cancelled, match="cancelled after"):
            run_tasks(abs, list(range(200)), sch, progress=lambda d, t: calls.append(d), cancel=cancel)
        assert len(calls) < 200


def test_bootstrap_bands_closed_form():
    """A node holding one of the N data (y) and a prior of precision a: over bootstrap resamples the node's
    estimate is k y / (a + k) with k ~ Binomial(N, 1/N) copies: its exact mean and sd."""
    xs = np.linspace(0, 1, M)
    ys = np.array([0.4, -0.2, 1.0, 0.3, 0.8])
    R = 400
    doc = learning.bootstrap_document(diagonal_regression(np.column_stack([xs, ys]).tolist()), R, level=0.8,
                                      scheduler="serial")
    k = np.arange(M + 1)
    w = binom.pmf(k, M, 1.0 / M)
    for i, y in enumerate(ys):
        mean = np.sum(w * k * y / (A_PRIOR + k))
        sd = math.sqrt(np.sum(w * (k * y / (A_PRIOR + k)) ** 2) - mean ** 2)
        assert abs(doc["h_mean"][i] - mean) < 4 * sd / math.sqrt(R)
        assert doc["h_sd"][i] == pytest.approx(sd, rel=0.15)
        assert doc["h_lo"][i] <= doc["h_mean"][i] <= doc["h_hi"][i]
    assert doc["h"] == pytest.approx((ys / (A_PRIOR + 1)).tolist(), rel=1e-9)  # the fit to all the data
    assert doc["h_bias"] == pytest.approx((np.array(doc["h_mean"]) - TRUTH).tolist())


def test_density_bootstrap_bands_and_bias():
    doc = learning.bootstrap_document(figure_config("fig21"), 10, scheduler="serial")
    P_mean, P_sd = np.array(doc["P_mean"]), np.array(doc["P_sd"])
    assert P_mean.shape == (10, 15) and np.all(P_sd >= 0) and doc["used"] == 10
    assert np.sum(P_mean, axis=1) * 1.0 == pytest.approx(np.ones(10), abs=1e-6)  # hy = 1: rows stay normalised
    assert doc["P_bias"] is not None and doc["h_bias"] is not None


@pytest.mark.parametrize("kwargs, message", [
    (dict(sizes=[5], resamples=0), "resamples must be at least 1"),
    (dict(sizes=[5], resamples=2000, lambdas=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]), "exceed the limit"),
    (dict(sizes=[5], resamples=2, lambdas=[-1.0]), "positive finite"),
    (dict(sizes=[5], resamples=2, mode="teacher"), "no truth|has none"),
    (dict(sizes=[5], resamples=2, scheduler="loca:2"), "unknown scheduler"),
    (dict(sizes=[5], resamples=2, evidence=True, field_P=True), "field L only"),
])
def test_bad_requests_are_refused_at_the_door(kwargs, message):
    cfg = figure_config("fig21")
    if kwargs.pop("field_P", False):
        cfg = figure_config("fig15")
    if kwargs.get("mode") == "teacher":
        cfg = {**cfg, "truth": None}
    with pytest.raises((ConfigError, ValueError), match=message):
        learning.learning_curve_document(cfg, **kwargs)


def test_scheduler_names_and_an_unreachable_address(monkeypatch):
    assert parse_scheduler(None) == ("serial", None)  # the default is the plain loop (issue 31: never slower)
    assert parse_scheduler("inprocess") == ("inprocess", None)
    assert parse_scheduler("local:3") == ("local", 3)
    assert parse_scheduler("tcp://10.0.0.1:8786") == ("address", "tcp://10.0.0.1:8786")
    for bad in ("local:0", "local:x", "local:1000", "tcp://", "nothing"):
        with pytest.raises(ValueError):
            parse_scheduler(bad)
    import bftcore.foundations.distributed as dist
    monkeypatch.setattr(dist, "CONNECT_SECONDS", 1.0)
    with pytest.raises(ValueError, match="^the Dask scheduler at tcp://127.0.0.1:9 "):
        run_tasks(abs, [1], "tcp://127.0.0.1:9")


def test_parse_sizes():
    assert learning.parse_sizes("5:200:8") == [round(5 * 40 ** (k / 7)) for k in range(8)]
    assert learning.parse_sizes("10:40:4:linear") == [10, 20, 30, 40]
    assert learning.parse_sizes("3:4:10") == [3, 4]
    for bad in ("5:200", "a:b:c", "0:10:3", "10:5:3", "5:10:3:cubic"):
        with pytest.raises(ConfigError):
            learning.parse_sizes(bad)


def test_cli_learning_curve_json_contract(tmp_path, capsys):
    path = tmp_path / "fig21.json"
    path.write_text(json.dumps(figure_config("fig21")))
    assert main(["learning-curve", str(path), "--n", "5:50:3", "--resamples", "3", "--lambda", "0.5:0.5:1",
                 "--scheduler", "serial", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n"] == [5, 16, 50]
    for key in ("train_error", "test_error"):
        assert set(doc[key]) >= {"mean", "sd"} and len(doc[key]["mean"]) == 3
    assert main(["learning-curve", str(path), "--n", "5:50", "--resamples", "3"]) == 2
    assert "LO:HI:K" in capsys.readouterr().err
    assert main(["learning-curve", str(path), "--n", "5:50:3", "--scheduler", "nowhere"]) == 2
    assert "unknown scheduler" in capsys.readouterr().err


def test_cli_learning_curve_of_a_csv_bootstraps_it(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, 40)
    table = tmp_path / "mine.csv"
    table.write_text("x,y\n" + "\n".join(f"{a},{2 + 0.5 * a + rng.normal()}" for a in x))
    assert main(["learning-curve", str(table), "--n", "5:40:3", "--resamples", "3", "--scheduler", "serial",
                 "--progress"]) == 0
    out = capsys.readouterr()
    assert "bootstrap" in out.out and "out-of-bag" in out.out
    assert "3/3" not in out.err and "9/9" in out.err  # the bar counts data sets: 3 sizes x 3 resamples


def test_replica_theory_beside_the_simulation_at_large_n():
    """Bootstrap of a smooth regression: the replica theory (an approximation, seed 002) against the simulated
    curve at the document's lambda: within 3 % for n >= 200 (the notes' §1.6 invariant 8 is 2 % for an RBF
    prior), and below it at small n (the known underestimate of the posterior variance)."""
    from bftcore.estimator import BFTRegressor
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, 200)
    y = np.sin(x) + 0.3 * rng.normal(size=200)
    est = BFTRegressor(lam=0.3, beta=11.0, l0=0.01, n=100)
    doc = est.learning_curve(x, y, sizes=[10, 200, 800], resamples=30, lambdas=[0.3], scheduler="serial")
    sim, rep = doc["curves"][0], doc["replica"]
    assert rep["approximation"] and rep["lambda"] == 0.3
    for i in (1, 2):
        assert rep["posterior_variance"][i] == pytest.approx(sim["posterior_variance"]["mean"][i], rel=0.03)
        assert rep["test_error"][i] == pytest.approx(sim["all_error"]["mean"][i], rel=0.03)
    assert rep["posterior_variance"][0] < sim["posterior_variance"]["mean"][0]


def test_estimators_learning_curve_and_bootstrap():
    from bftcore.estimator import BFTDensity, BFTRegressor
    rng = np.random.default_rng(1)
    y = np.concatenate([rng.normal(-1, 0.5, 40), rng.normal(1, 0.6, 40)])
    doc = BFTDensity().learning_curve(y, sizes=[10, 80], resamples=3, lambdas=[1.0], scheduler="serial")
    assert doc["mode"] == "bootstrap" and doc["unique_fraction"]["N"] == 80
    bands = BFTDensity().bootstrap(y, resamples=4, scheduler="serial")
    assert len(bands["h_mean"]) == 1 and np.array(bands["P_mean"]).shape == (1, 200)
    x = rng.uniform(0, 10, 30)
    yy = np.sin(x) + 0.3 * rng.normal(size=30)
    reg = BFTRegressor(lam="evidence", n=60)
    doc = reg.learning_curve(x, yy, sizes=[5, 30], resamples=3, scheduler="serial")
    assert doc["headline"] == "evidence" and reg.lam_ > 0  # the fit chose lambda for the document first
    assert doc["replica"] is None  # l0 = 0: an improper prior has no covariance for the theory


def test_cli_exports_csv_and_png(tmp_path, capsys):
    from PIL import Image
    path = tmp_path / "fig21.json"
    path.write_text(json.dumps(figure_config("fig21")))
    out = tmp_path / "out"
    out.mkdir()
    assert main(["fit", str(path), "--csv", str(out / "fit"), "--png", str(out / "fit.png")]) == 0
    P = np.loadtxt(out / "fit_P.csv", delimiter=",", skiprows=1)
    assert P.shape == (150, 4) and Image.open(out / "fit.png").size == (800, 560)
    fit = api.fit(figure_config("fig21"))
    assert P[:, 2] == pytest.approx(np.ravel(fit["P"]), rel=1e-9)
    assert main(["bootstrap", str(path), "--resamples", "3", "--scheduler", "serial", "--csv", str(out / "bs"),
                 "--png", str(out / "bs.png")]) == 0
    h = np.loadtxt(out / "bs_h.csv", delimiter=",", skiprows=1)
    assert h.shape[0] == 10 and (out / "bs.png").stat().st_size > 1000
    assert main(["learning-curve", str(path), "--n", "5:20:2", "--resamples", "2", "--scheduler", "serial",
                 "--csv", str(out / "lc"), "--png", str(out / "lc.png")]) == 0
    assert (out / "lc.csv").read_text().startswith("curve,lambda,n,train_mean")
    capsys.readouterr()
    assert main(["fit", str(path), "--png", str(tmp_path / "missing" / "x.png")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_sweep_and_basins_take_a_scheduler(tmp_path, capsys):
    path = tmp_path / "fig28.json"
    path.write_text(json.dumps(figure_config("fig28")))
    assert main(["basins", str(path), "--scheduler", "inprocess", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    ref = api.basins_document(figure_config("fig28"))
    assert got["minima"] == json.loads(json.dumps(ref["minima"]))
    assert main(["sweep", str(path), "--beta", "0.5:2:3", "--scheduler", "bogus"]) == 2
    assert "unknown scheduler" in capsys.readouterr().err


def _listening_addresses() -> list[str]:
    """The local addresses this process listens on (TCP, IPv4 and IPv6), from /proc."""
    import os
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in list(fh)[1:]:
                f = line.split()
                if f[3] == "0A" and f[9] in inodes:  # LISTEN
                    out.append(f[1].split(":")[0])
    return out


def test_dask_in_process_listens_on_the_loopback_only():
    """Dask's scheduler and worker start HTTP servers (0.0.0.0:8787 by default): ours must not open a port to the
    network each time a user asks for a learning curve."""
    seen: list[list[str]] = []
    run_tasks(abs, list(range(60)), "inprocess", progress=lambda d, t: seen.append(_listening_addresses()))
    loopback = {"0100007F", "00000000000000000000000001000000"}  # 127.0.0.1 and ::1 as /proc writes them
    opened = {a for addrs in seen for a in addrs}
    assert seen and opened and opened <= loopback, opened
