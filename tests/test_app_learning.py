"""Headless tests of your own data (a CSV upload, app/views/share.py) and of the learning curve: the session's
task (app.session.BFTSession.start_learning, on app.work's learning lane) and its view (app/views/learning.py): no
browser, no server.  The task's worker thread runs the real bftcore.api.learning_curve_document; where a test must
act while a curve is running, the curve is held at its first progress report until the test lets it go (no timing
involved)."""
import threading

import numpy as np
import pytest

from app import session as session_module
from app import work
from app.configuration import MAX_POINTS
from app.session import BFTSession
from app.views.learning import CANCELLED_BY_CHANGE, LearningView
from app.views.share import SharePanel, load_upload
from bftcore import api

GOOD_CSV = b"x,y\n2.0,3.5\n4.0,7.25\n6.5,5.0\n8.0,11.0\n3.0,9.5\n"


def label(item) -> str:
    return getattr(item.label, "value", item.label)


def finite(values) -> bool:
    return len(values) > 0 and bool(np.all(np.isfinite(np.asarray(values, float))))


# ------------------------------------------------------------------------------------------------ the upload
def test_a_two_column_csv_becomes_the_data_with_a_grid_fitted_to_it_and_keeps_the_prior():
    s = BFTSession(live=False)
    s.param.update(lam=0.7, order_coef=0.05)
    panel = SharePanel(session=s)
    panel.upload.filename = "mine.csv"  # the page sets both together; the value's watcher reads the name
    panel.upload.value = GOOD_CSV
    assert s.message.startswith("Loaded 5 points from mine.csv as a density p(y|x) on a grid fitted"), s.message
    assert s.data == [[2.0, 3.5], [4.0, 7.25], [6.5, 5.0], [8.0, 11.0], [3.0, 9.5]]
    # the grid of bftcore.foundations.config._fitted_grid: the data's range padded by 10 % each side, 30 x 40 nodes,
    # Neumann in x, free in y
    assert (s.x_min, s.x_max, s.nx) == (pytest.approx(1.4), pytest.approx(8.6), 30)
    assert (s.y_min, s.y_max, s.ny) == (pytest.approx(2.75), pytest.approx(11.75), 40)
    assert (s.boundary_x, s.boundary_y, s.grid_size) == ("neumann", "free", "as loaded (custom)")
    # the table's units are its own: lambda is chosen by the evidence (the prior's order and coefficient are kept)
    assert (s.order_coef, s.model) == (0.05, "density, prior on L") and s.lam != 0.7
    doc = {**s.to_config(), "choose": {"lambda": "evidence"}}
    assert s.lam == pytest.approx(api.choose_hyperparameters(doc)[1]["chosen"]["lambda"], rel=1e-9)
    assert f"chosen by the evidence: λ = {s.lam:.4g}" in s.message, s.message
    assert s.truth == "none"  # the paper's truth belongs to the paper's problem, not to your data
    s.solve()
    assert s.converged and s.record.P.shape == (30, 40)


def test_a_one_column_table_is_a_one_dimensional_density():
    s = BFTSession(live=False)
    raw = b"# heights\nheight\n1.5\n2.0\n2.25\n3.5\n"
    assert load_upload(s, raw, "heights.txt"), s.message
    assert "1-D density p(y)" in s.message and "y from 1.3 to 3.7 on 200 nodes" in s.message
    assert s.nx == 1 and s.ny == 200
    assert [y for _, y in s.data] == [1.5, 2.0, 2.25, 3.5]
    assert s.y_min == pytest.approx(1.3) and s.y_max == pytest.approx(3.7)
    s.solve()
    assert s.converged


def test_a_tab_separated_table_without_a_known_name_is_read_as_a_table_and_json_still_loads():
    s = BFTSession(live=False)
    assert load_upload(s, b"1\t2\n3\t4\n", None), s.message
    assert s.data == [[1.0, 2.0], [3.0, 4.0]]
    assert load_upload(s, b'{"data": [[3, 3], [7, 12], [5, 8]]}', "config.json"), s.message
    assert s.message.startswith("Loaded the configuration") and len(s.data) == 3 and s.nx == 10


BAD_TABLES = [
    (b"x,y\n1,2\nabc,3\n", "'abc' is not a number"),
    (b"x,y\n1,2\nnan,3\n", "NaN or infinity"),
    (b"1,2\n3,4\n5\n", "every line needs the same columns"),
    (b"1,2,3\n4,5,6\n", "3 columns"),
    (b"", "no data lines"),
    (b"x,y\n", "no data lines"),
    (b"\xff\xfe\x00garbage", "not UTF-8"),
    ("\n".join(f"{k % 9 + 1},{k % 13 + 1}" for k in range(MAX_POINTS + 1)).encode(), f"at most {MAX_POINTS}"),
    (b"1\n" * (17 * 1024 * 1024), "over the limit"),  # 34 MB, over the server's 32 MiB of a document
]


@pytest.mark.parametrize("raw, words", BAD_TABLES, ids=["text", "nan", "ragged", "three-columns", "empty",
                                                         "header-only", "binary", "too-many-points", "too-big"])
def test_a_bad_table_is_refused_with_what_was_wrong_and_the_state_is_kept(raw, words):
    s = BFTSession(live=False)
    s.param.update(lam=0.4, data=[[2.0, 2.0], [5.0, 9.0]])
    s.solve()
    before, record = s.to_config(), s.record
    assert not load_upload(s, raw, "bad.csv")
    assert s.message.startswith(("Refused: bad.csv", "Refused bad.csv: ")), s.message
    assert "Nothing was changed." in s.message
    assert words in s.message, s.message
    assert "column" in s.message  # and what a table must look like
    assert s.to_config() == before and s.record is record


def test_a_regression_with_a_one_column_table_is_refused_by_data_documents_own_message():
    s = BFTSession(live=False)
    assert s.load_preset("two_trends")
    before = s.to_config()
    assert not load_upload(s, b"1\n2\n3\n", "y.csv")
    assert "a regression needs a table of two columns (x, y), got 1" in s.message, s.message
    assert s.to_config() == before


def test_a_table_the_gate_refuses_with_the_current_prior_is_refused_by_name():
    s = BFTSession(live=False)
    assert s.load_preset("fig17")  # a stiff prior: on 200 nodes of a 1-D density its K passes the gate's bound
    before = s.to_config()
    assert not load_upload(s, b"1\n2\n3\n", "y.dat")
    assert s.message.startswith("Refused y.dat: ") and "Nothing was changed." in s.message, s.message
    assert s.to_config() == before


# ------------------------------------------------------------------------------------------ the learning view
@pytest.fixture
def fig21():
    s = BFTSession(live=False)
    assert s.load_preset("fig21")
    view = LearningView(session=s)
    view.param.update(n_from=5, n_to=20, n_sizes=2, resamples=3)
    yield s, view
    view.cancel()
    assert view.wait(60)


@pytest.fixture
def held(monkeypatch):
    """The learning curve stops at its first progress report until ``release`` is set."""
    real = api.learning_curve_document
    started, release = threading.Event(), threading.Event()

    def gated(cfg, sizes, progress=None, **kw):
        def hold(done, total):
            progress(done, total)
            started.set()
            release.wait(60)
        return real(cfg, sizes, progress=hold, **kw)
    monkeypatch.setattr(session_module.api, "learning_curve_document", gated)
    yield started, release
    release.set()


def test_a_learning_curve_fills_every_source_and_the_progress_reaches_the_total(fig21, monkeypatch):
    s, view = fig21
    partials = []
    draw = view._draw
    monkeypatch.setattr(view, "_draw", lambda doc, lam0: (partials.append(doc.get("complete")), draw(doc, lam0)))
    assert view.start()
    assert view.button.disabled and not view.cancel_button.disabled
    # the axes follow the request at once: a tick at each size n and at each lambda compared
    assert view.n_ticks.ticks == [5, 20] and (view.figure.x_range.start, view.figure.x_range.end) == (4.0, 25.0)
    assert view.lambda_ticks.ticks[:5] == pytest.approx([0.125, 0.25, 0.5, 1.0, 2.0])
    assert view.wait(120)
    assert s.learning_state == "complete", view.note.object
    assert partials[-1] is True and False in partials  # partial documents were drawn before the final one
    for j in range(5):  # one curve per lambda: 1/4, 1/2, 1, 2 and 4 times the preset's 0.5
        data = view.curves[j].data
        assert list(data["n"]) == [5, 20]
        for col in ("test", "test_lo", "test_hi", "train", "train_lo", "train_hi"):
            assert finite(data[col]), (j, col)
        assert np.all(data["test_lo"] <= data["test_hi"])
        assert view.curve_items[j].visible
    assert len(view.curves[5].data["n"]) == 0 and not view.curve_items[5].visible  # no evidence curve asked
    assert [label(i) for i in view.curve_items[:5]] == ["λ = 0.125", "λ = 0.25", "λ = 0.5 (current)", "λ = 1",
                                                        "λ = 2"]
    assert list(view.best.data["n"]) == [5, 20] and set(view.best.data["lam"]) <= {0.125, 0.25, 0.5, 1.0, 2.0}
    assert view.progress.value == view.progress.max == 6
    assert view.progress_text.text == "6 of 6 data sets"
    assert view.note.object.startswith("Done: 30 fits") and "Teacher mode" in view.note.object
    assert not view.button.disabled and view.cancel_button.disabled
    assert label(view.key_items[0]) == "test error (solid)" and not view.bag.visible


def test_a_second_click_while_one_runs_does_nothing(fig21, held):
    s, view = fig21
    started, release = held
    assert view.start()
    assert started.wait(60)
    first = s.work.running("learning")
    assert view.button.disabled and first is not None
    assert not view.start()  # the button is disabled, and a click that still arrives changes nothing
    assert s.work.running("learning") is first
    release.set()
    assert view.wait(120) and s.learning_state == "complete"


def test_cancel_stops_the_curve_clears_it_and_says_so(fig21, held):
    s, view = fig21
    started, release = held
    assert view.start()
    assert started.wait(60)
    task = s.work.running("learning")
    assert view.cancel()
    assert task.cancelled.is_set()
    release.set()
    assert view.wait(60)
    done, total = s.learning_progress
    assert task.outcome == s.learning_state == "cancelled" and done < total
    assert all(len(src.data["n"]) == 0 for src in view.curves) and len(view.best.data["n"]) == 0
    assert view.note.object.startswith("Cancelled.") and view.progress_text.text.endswith("data sets, stopped")
    assert not view.button.disabled and view.cancel_button.disabled
    assert view.start() and view.wait(120) and s.learning_state == "complete"  # and it starts again


@pytest.mark.parametrize("change", ["slider", "click", "preset", "upload"])
def test_a_change_of_the_problem_cancels_the_running_curve(fig21, held, change):
    s, view = fig21
    started, release = held
    assert view.start()
    assert started.wait(60)
    task = s.work.running("learning")
    if change == "slider":
        s.lam = 0.8
    elif change == "click":
        assert s.add_point(5.0, 8.0)
    elif change == "preset":
        assert s.load_preset("fig22")
    else:
        assert load_upload(s, GOOD_CSV, "mine.csv"), s.message
    assert task.cancelled.is_set()
    release.set()
    assert view.wait(60)
    assert task.outcome == s.learning_state == "cancelled"
    assert view.note.object.startswith("Cancelled: the problem changed.")
    assert CANCELLED_BY_CHANGE in view.note.object.lower() and view.progress_text.text.endswith(", stopped")
    assert all(len(src.data["n"]) == 0 for src in view.curves)
    assert not view.button.disabled


def test_a_finished_curve_stays_after_a_change_and_says_it_is_for_the_previous_problem(fig21):
    s, view = fig21
    assert view.start() and view.wait(120)
    s.lam = 0.8
    assert list(view.curves[0].data["n"]) == [5, 20]
    assert "before your last change" in view.note.object


def test_bootstrap_of_your_own_regression_data_labels_the_out_of_bag_error_and_adds_the_replica_theory():
    rng = np.random.default_rng(1)
    x = np.round(rng.uniform(0, 1, 12), 3)
    y = np.round(np.sin(6 * x) + 0.3 * rng.standard_normal(12), 3)
    s = BFTSession(live=False)
    assert s.load_config({"model": "regression", "grid": {"x": {"min": 0, "max": 1, "n": 21}},
                          "templates": [{"kind": "constant", "value": 0}],
                          "prior": {"lambda": 1.0, "l0": 0.1, "l2": 1.0},
                          "data": [[float(a), float(b)] for a, b in zip(x, y)]}), s.message
    view = LearningView(session=s)
    view.param.update(n_from=5, n_to=20, n_sizes=2, resamples=3)
    assert view.start() and view.wait(120)
    assert s.learning_state == "complete", view.note.object
    assert label(view.key_items[0]) == "out-of-bag error (solid)"
    assert "Bootstrap of your 12 points" in view.note.object and "out-of-bag" in view.note.object
    assert view.bag.visible and view.bag.object.endswith("by n: 5: 0.36 (0.35) · 20: 0.78 (0.82)")
    assert list(view.replica.data["n"]) == [5, 20] and finite(view.replica.data["test"])
    assert view.replica_item.visible and label(view.replica_item).startswith("replica theory (approx.)")


def test_the_evidence_chosen_lambda_adds_a_curve_and_its_lambdas(fig21):
    s, view = fig21
    view.param.update(n_sizes=2, resamples=2, evidence=True)
    assert view.start() and view.wait(180)
    assert s.learning_state == "complete", view.note.object
    assert label(view.curve_items[5]) == "evidence-chosen λ" and finite(view.curves[5].data["test"])
    assert finite(view.chosen.data["lam"]) and view.lambda_figure.legend.visible
    assert label(view.chosen_item) == "evidence (mean)"


def test_a_request_bftcore_refuses_says_why_and_starts_nothing():
    s = BFTSession(live=False)
    s.param.update(truth="none", data=[[3.0, 3.0]])  # no truth: a bootstrap, of one point
    view = LearningView(session=s)
    view.param.update(n_from=5, n_to=20, n_sizes=2, resamples=3)
    assert view.start() and view.wait(60)
    assert s.learning_state == "failed"
    assert "needs at least 2 points" in view.note.object, view.note.object
    view.param.update(n_from=50, n_to=20)
    assert not view.start() and "larger than n to" in view.note.object


def test_a_curve_waits_for_a_free_slot_of_the_server_and_then_runs(fig21, monkeypatch):
    """Every thread of the server's learning lane is taken by another session's work: the curve says that it waits,
    then runs when a thread is free."""
    s, view = fig21
    lane = work.Lane("long-test", 1)
    monkeypatch.setattr(session_module, "LONG", lane)
    other, release = threading.Event(), threading.Event()
    lane.submit(lambda: (other.set(), release.wait(60)))  # another session's learning curve holds the only thread
    assert other.wait(60)
    assert view.start()
    assert s.learning_state == "waiting"
    assert view.note.object.startswith("Waiting for a free worker")
    assert view.progress.value == 0 and view.button.disabled
    release.set()
    assert view.wait(120) and s.learning_state == "complete"
    assert lane.busy == 0  # the thread was given back


def test_a_session_ended_cancels_its_curve_and_its_worker_stops(fig21, held):
    s, view = fig21
    started, release = held
    assert view.start() and started.wait(60)
    task = s.work.running("learning")
    s.close()
    assert task.cancelled.is_set()
    release.set()
    assert task.wait(60) and task.outcome == "cancelled"
    assert not view.start()  # a closed session starts no new work


def test_a_curve_over_the_servers_time_budget_stops_with_a_message(fig21, monkeypatch):
    s, view = fig21
    monkeypatch.setattr(session_module, "LEARNING_SECONDS", 0.0)  # over budget as soon as the first result arrives
    assert view.start() and view.wait(120)
    assert s.learning_state == "failed"
    assert "the server's time budget for a learning curve" in view.note.object, view.note.object
    assert not view.button.disabled
