"""Headless tests of the dashboard's session model (app/session.py and the modules under it): no browser, no server."""
import json

import numpy as np
import pytest

from app.configuration import MAX_POINTS
from app.session import BFTSession, preset_catalogue  # noqa: E402
from bftcore import api


@pytest.fixture
def session():
    s = BFTSession()
    s.solve()
    return s


def test_default_state_solves_and_normalises(session):
    P, g = session.record.P, session.grid
    assert session.converged
    assert np.allclose(P.sum(axis=1) * g.hy, 1.0, atol=1e-8)
    energies = [h.energy for h in session.history]
    assert energies[-1] < energies[0]


def test_config_round_trip_is_the_identity(session):
    from bftcore.api import validate_config
    doc = validate_config(session.to_config())
    other = BFTSession(live=False)
    assert other.load_config(json.dumps(doc))
    assert validate_config(other.to_config()) == doc


def test_click_adds_a_snapped_point_and_changes_the_density(session):
    before = session.record.P.copy()
    assert session.add_point(5.2, 8.9)
    assert session.data[-1] == [5.0, 9.0]
    assert session.history[0].iteration == 0 and session.converged
    after = session.record.P
    assert np.abs(after - before).max() > 1e-3
    assert after[4, 8] > before[4, 8]  # more mass where the new datum sits


def test_off_grid_click_is_ignored_with_a_message(session):
    data = list(session.data)
    assert not session.add_point(12.0, 3.0)
    assert session.data == data
    assert "outside the grid" in session.message


def test_remove_and_undo(session):
    n = len(session.data)
    assert not session.remove_point_near(8.0, 3.0)  # nothing there
    assert session.remove_point_near(3.1, 3.2)
    assert len(session.data) == n - 1 and [3.0, 3.0] not in session.data
    assert session.undo()
    assert [3.0, 3.0] in session.data
    session.clear_points()
    assert session.data == []
    session.undo()
    assert len(session.data) == n


def test_point_limit(session):
    session.live = False
    session.data = [[5.0, 5.0]] * MAX_POINTS
    assert not session.add_point(3.0, 3.0)
    assert len(session.data) == MAX_POINTS and str(MAX_POINTS) in session.message


def test_slider_change_restarts_traces_warm(session):
    run, energy = session.run_id, session.history[-1].energy
    train = session.history[-1].train_error
    session.lam = 3.0
    assert session.run_id == run + 1
    assert session.to_config()["prior"]["lambda"] == 3.0
    assert session.history[-1].energy != pytest.approx(energy)
    # warm start: the first record of the new run is the previous solution, not the kernel start
    assert session.history[0].train_error == pytest.approx(train, abs=1e-10)


def test_warm_start_begins_at_the_previous_field(session):
    P_old = session.record.P.copy()
    session.live = False
    session.lam = 2.0
    session.start_run(warm=True, play=False)  # shows iteration 0 only
    assert session.history[-1].iteration == 0
    assert np.allclose(session.record.P, P_old, atol=1e-10)
    session.reset(play=False)  # a reset goes back to the configured (kernel) start
    assert not np.allclose(session.record.P, P_old, atol=1e-6)


def test_step_pause_and_run(session):
    session.live = False
    session.reset(play=False)
    assert [h.iteration for h in session.history] == [0]
    session.step()
    session.step()
    assert [h.iteration for h in session.history] == [0, 1, 2]
    session.play()
    assert session.converged and len(session.history) > 3


@pytest.mark.parametrize("name", sorted(preset_catalogue()))
def test_every_preset_loads_and_sets_its_configuration(name):
    from bftcore.api import validate_config
    doc, text = preset_catalogue()[name]
    s = BFTSession()
    assert s.load_preset(name), s.message
    assert s.preset == name and text
    assert validate_config(s.to_config())["data"] == validate_config(doc)["data"]
    mine, theirs = validate_config(s.to_config()), api.choose_hyperparameters(doc)[0]  # lambda by the evidence
    assert mine["prior"] == theirs["prior"] and mine["templates"] == theirs["templates"]
    assert mine.get("labels") == theirs.get("labels")
    assert mine["solver"]["method"] == theirs["solver"]["method"] and mine["beta"] == pytest.approx(theirs["beta"])
    assert s.converged and len(s.history) >= 2


@pytest.mark.parametrize("bad", [
    b"{not json",
    json.dumps({"model": "density", "prior": {"lambda": -1}}),
    json.dumps({"model": "density", "data": [[30, 3]]}),
    json.dumps([1, 2, 3]),
    json.dumps({"model": "density", "templates": [{"kind": "paper_t3"}]}),
    json.dumps({"model": "density", "templates": [{"kind": "uniform"}], "weights": [0.5, 0.5]}),
    json.dumps({"model": "regression", "templates": [{"kind": "constant", "value": 1}], "truth": "paper"}),
])
def test_bad_upload_is_refused_and_state_unchanged(session, bad):
    before = (session.to_config(), session.run_id, session.record)
    assert not session.load_config(bad)
    assert session.message.startswith("Refused the configuration")
    assert (session.to_config(), session.run_id, session.record) == before


def test_solver_failure_keeps_last_good_solution(session, monkeypatch):
    from app import runner

    def broken(config, init=None):
        raise FloatingPointError("boom")
        yield  # pragma: no cover

    good = session.record
    monkeypatch.setattr(runner, "iterate", broken)
    session.lam = 2.0
    assert "solver failed" in session.message and session.record is good


def test_csv_export(session):
    lines = session.data_csv().strip().splitlines()
    assert lines[0] == "x,y" and len(lines) == 1 + len(session.data)


def test_sessions_share_nothing():
    a, b = BFTSession(live=False), BFTSession(live=False)
    a.add_point(5, 5)
    assert b.data == [[3.0, 3.0], [7.0, 12.0]]
    a.data[0][0] = 4.0  # in place: a shared default list (or shared points) would show in b
    assert b.data[0][0] == 3.0 and BFTSession(live=False).data[0][0] == 3.0


# --- issue 4: edge clicks, every preset, any valid document, warm-start export, URL state -------------------------
@pytest.mark.parametrize("click, node", [
    ((0.999999631, 8.0), [1.0, 8.0]),        # what the browser sends for a click on the x = 1 node
    ((10.000000369, 4.9999995), [10.0, 5.0]),
    ((3.0, 0.9999988), [3.0, 1.0]),
    ((10.0000004, 15.0000001), [10.0, 15.0]),
    ((0.55, 1.4), [1.0, 1.0]),                # anywhere in the edge cell drawn around the node
])
def test_clicks_in_the_edge_cells_add_the_edge_node(session, click, node):
    before = session.record.P.copy()
    assert session.add_point(*click), session.message
    assert session.data[-1] == node
    ix, iy = int(node[0] - 1), int(node[1] - 1)
    assert session.record.P[ix, iy] > before[ix, iy]


def test_clicks_beyond_the_edge_cells_are_ignored(session):
    data = list(session.data)
    assert not session.add_point(0.45, 8.0)
    assert not session.add_point(5.0, 15.6)
    assert session.data == data and "outside" in session.message


def test_every_bftcore_preset_is_offered_and_round_trips_exactly():
    from bftcore.api import validate_config
    from bftcore.models import presets
    catalogue = preset_catalogue()
    assert set(presets.PRESETS) <= set(catalogue)
    assert {"fig7", "two_trends", "overfitting", "metastable_mixture"} <= set(catalogue)
    for name, (doc, text) in catalogue.items():
        s = BFTSession(live=False)
        assert s.load_config(doc, preset=name), (name, s.message)
        # a preset on real data chooses lambda by the evidence as it loads: the document it round-trips to is the
        # chosen one
        assert validate_config(s.to_config()) == api.choose_hyperparameters(doc)[0], name
        assert text, name  # an explanation for a class


@pytest.mark.parametrize("name, nx, n_data", [("fig7", 1, 1), ("two_trends", 101, 5)])
def test_regression_presets_follow_their_own_grid_and_solve(name, nx, n_data):
    from bftcore.api import fit
    s = BFTSession()
    assert s.load_preset(name), s.message
    assert not s.kind.y_on_grid and s.grid.x.n == nx and len(s.data) == n_data
    assert s.converged and len(s.record.h) == nx
    assert len(s.file_templates) == 2 and s.template_kinds() == []  # repeated kinds: kept, shown read-only
    ref = fit(preset_catalogue()[name][0])
    assert np.allclose(s.record.h, ref["h"], atol=1e-6)
    assert s.result and len(s.result["exact"]["b"]) == 2


def test_a_click_on_a_custom_grid_snaps_to_its_nodes():
    s = BFTSession()
    assert s.load_preset("two_trends")
    assert s.add_point(4.04, 3.3)
    assert s.data[-1] == [4.0, 3.3]
    assert s.add_point(10.04, 1.0)  # in the edge cell of x = 10 (spacing 0.1)
    assert s.data[-1] == [10.0, 1.0]


def test_document_with_several_prior_orders_is_accepted_and_solved_as_written():
    from bftcore.api import fit, validate_config
    doc = {"model": "density", "data": [[3, 3], [7, 12], [5, 9]],
           "prior": {"field": "L", "lambda": 1.0, "l2": 0.1, "l4": 0.05},
           "solver": {"method": "newton", "init": "kernel"}}
    s = BFTSession()
    assert s.load_config(json.dumps(doc)), s.message
    assert s.order == "l2" and s.order_coef == 0.1 and s.extra_orders == {"l4": 0.05}
    mine = validate_config(s.to_config())
    assert mine == validate_config(doc)
    assert mine["prior"]["l2"] == 0.1 and mine["prior"]["l4"] == 0.05
    assert np.allclose(s.record.L, fit(doc)["L"], atol=1e-6)
    s.order_coef = 0.2  # the slider moves its own order; the file's other order stays in the prior
    assert s.to_config()["prior"]["l4"] == 0.05 and s.to_config()["prior"]["l2"] == 0.2


def test_document_with_repeated_and_array_templates_and_unnormalised_weights_round_trips():
    from bftcore.api import validate_config
    arr = np.full((10, 15), -np.log(15.0)).tolist()
    doc = {"model": "density", "data": [[2, 4], [8, 11]],
           "prior": {"lambda": 0.5, "l2": 1.0, "l6": 0.01},
           "templates": [{"kind": "gaussian", "mu": 4, "sigma": 2}, {"kind": "gaussian", "mu": 11, "sigma": 2},
                         {"kind": "array", "values": arr}],
           "weights": [1, 3, 0.5], "beta": 3.0, "solver": {"init": "template:1", "min_iter": 2, "tol": 1e-9}}
    s = BFTSession()
    assert s.load_config(doc), s.message
    assert validate_config(s.to_config()) == validate_config(doc)
    assert s.init == "template 2" and s.beta == 3.0 and len(s.history[-1].mixing) == 3
    assert "read-only" in s.message
    s.use_menu_templates()  # back to the menu: the file's templates are dropped, the rest stays
    assert s.to_config()["templates"] == [] and s.to_config()["prior"]["l6"] == 0.01


def test_a_document_with_the_coarse_start_loads_and_round_trips():
    """solver.init "coarse" (the multilevel start) is a document's value the menu keeps: on the dashboard's small
    grids it is the kernel start, so the run is the kernel start's."""
    from bftcore.api import validate_config
    doc = {"model": "density", "data": [[2, 4], [8, 11], [5, 7]], "prior": {"l2": 1.0}, "solver": {"init": "coarse"}}
    s = BFTSession()
    assert s.load_config(doc), s.message
    assert s.init == "coarse" and s.converged
    assert validate_config(s.to_config()) == validate_config(doc)
    kernel = api.fit({**doc, "solver": {"init": "kernel"}})
    assert s.history[-1].energy == pytest.approx(kernel["energy"], rel=1e-12)


def test_warm_start_export_reproduces_the_run_with_the_cli_solver():
    from bftcore.api import fit, validate_config
    s = BFTSession()
    assert s.load_preset("fig27")
    s.init = "keep current"
    assert s.add_point(5.0, 2.0)  # a warm-started run from the fig27 solution
    assert s.converged
    doc = json.loads(json.dumps(s.export_config()))
    cfg = validate_config(doc)  # what `python -m bftcore fit` accepts
    assert cfg["solver"]["init"] == "template:2" and cfg["weights"][-1] == 0.0
    assert cfg["templates"][:2] == s.to_config()["templates"]
    res = fit(doc)
    assert np.allclose(res["L"], s.record.L, atol=1e-6)
    assert res["energy"] == pytest.approx(s.history[-1].energy, rel=1e-9)
    # the configured start would not reproduce it: the warm start is what the export carries
    cold = fit(s.to_config())
    assert not np.allclose(cold["L"], s.record.L, atol=1e-6) or cold["iterations"] != res["iterations"]


def test_export_without_warm_start_is_the_configuration():
    s = BFTSession()
    s.add_point(4, 4)
    assert s.export_config() == s.to_config()


def test_warm_start_export_of_a_problem_without_templates_adds_the_zero_template():
    from bftcore.api import fit
    s = BFTSession()
    s.init = "keep current"
    s.add_point(6.0, 6.0)
    doc = s.export_config()
    assert doc["weights"] == [1.0, 0.0] and not np.any(doc["templates"][0]["values"])
    assert np.allclose(fit(doc)["L"], s.record.L, atol=1e-6)


def test_url_parameters_round_trip_the_state_exactly():
    """Serialise every URL parameter as the share panel writes the address bar and load them into a fresh
    session with panel's query parser."""
    from app.views.share import url_query
    from bftcore.api import validate_config
    s = BFTSession(live=False)
    assert s.load_preset("fig7")
    from panel.util import parse_query
    s.param.update(lam=0.7, tol=1e-9, data=s.data + [[0.0, 0.4]],
                   regression_truth={"kind": "constant", "value": 0.1})
    parsed = parse_query(url_query(s))
    other = BFTSession(live=False)
    other.param.update(**{n: other.param[n].deserialize(v) for n, v in parsed.items()})
    assert validate_config(other.to_config()) == validate_config(s.to_config())


def test_a_burst_of_clicks_is_solved_once_for_the_latest_state():
    """The served path: one runner per session, stale runs dropped and closed, the traces complete."""
    import asyncio

    from bokeh.document import Document

    class ServedDoc(Document):
        session_context = object()

        def add_next_tick_callback(self, fn):
            asyncio.get_event_loop().call_soon(fn)

    async def scenario():
        s = BFTSession(doc=ServedDoc())
        s.start_run(warm=False, play=True)
        while s.running:
            await asyncio.sleep(0.01)
        runs = []
        for pt in [(2.0, 14.0), (9.0, 2.0), (5.0, 7.0)]:
            s.add_point(*pt)
            runs.append(s.pump.run)
        while s.running:
            await asyncio.sleep(0.01)
        return s, runs

    s, runs = asyncio.run(scenario())
    assert s.converged and s.pump.shown_run is runs[-1]
    assert all(r.gen.gi_frame is None for r in runs)  # every generator closed (stale ones by the runner)
    assert [h.iteration for h in s.history] == list(range(len(s.history)))  # no record lost to coalescing
    assert s.history[0].train_error != s.history[-1].train_error
    assert s.record.P[4, 6] > s.record.P[4, 12]  # the last click (5, 7) is in the solution


def test_a_click_on_a_small_grid_carries_its_first_frame_and_the_traces_follow():
    """Issue 13, click latency: served, a user action that starts a quick run (at most QUICK_NODES nodes) gets its
    iteration 1 computed at the end of the action's message; that first frame is the heatmap alone (the traces,
    mixing bars and status line follow with the next frame).  A larger grid starts on its worker thread instead."""
    import asyncio

    from bokeh.document import Document

    from app import runner
    from app.transport import one_message

    class ServedDoc(Document):
        session_context = object()

        def add_next_tick_callback(self, fn):
            asyncio.get_event_loop().call_soon(fn)

    async def scenario():
        doc = ServedDoc()
        s = BFTSession(doc=doc)
        s.start_run(warm=False, play=True)
        while s.running:
            await asyncio.sleep(0.01)
        before, hist_before, run_id = s.record, list(s.history), s.run_id
        with one_message(doc):
            s.add_point(5.0, 7.0)
            assert s.record is before              # nothing computed inside the action itself
        first = s.record
        assert first is not before and first.iteration == 1 and s.pump.run.pushed
        assert first.P[4, 6] > before.P[4, 6]      # the new point is in that frame
        assert s.history == hist_before and s.run_id == run_id  # the traces wait for the next frame
        while s.running:
            await asyncio.sleep(0.01)
        assert s.run_id == run_id + 1 and [h.iteration for h in s.history] == list(range(len(s.history)))
        assert s.history[-1].iteration == s.record.iteration and s.status.startswith(
            f"iteration {s.record.iteration}")
        # a grid above QUICK_NODES: the action's message goes without a frame; the worker thread computes it
        s.param.update(grid_size="as loaded (custom)", nx=40, ny=40)
        while s.running:
            await asyncio.sleep(0.01)
        assert 40 * 40 > runner.QUICK_NODES
        before = s.record
        with one_message(doc):
            s.add_point(5.0, 7.0)
        assert s.record is before and not s.pump.run.pushed
        while s.running:
            await asyncio.sleep(0.01)
        assert s.record is not before and s.record.P.shape == (40, 40)

    asyncio.run(scenario())


# --- issue 12: one record shape, the template registry, l0 ------------------------------------------------------
def test_the_history_holds_the_solvers_records_without_their_arrays():
    from bftcore.foundations.records import Record
    s = BFTSession(live=False)
    s.solve()
    assert s.history and all(isinstance(r, Record) for r in s.history)
    assert all(r.L is None and r.P is None and r.h is None and r.field is None for r in s.history)
    assert s.record.L is not None and s.history[-1].iteration == s.record.iteration
    assert s.history[-1].summary()["energy"] == pytest.approx(s.record.energy)
    assert s.status.startswith(f"iteration {s.history[-1].iteration}  ·  energy {s.history[-1].energy:.4f}")


def test_the_template_menu_and_labels_are_bftcores_registry():
    from app.views.controls import template_options
    from bftcore.foundations.templates import describe, kinds
    s = BFTSession(live=False)
    assert list(s.param.templates.objects) == list(kinds("density", menu=True) + kinds("regression", menu=True))
    assert list(template_options("density").values()) == ["uniform", "paper_t1", "paper_t2", "gaussian"]
    assert list(template_options("regression")) == ["constant", "linear trend"]
    s.templates = ["gaussian", "uniform"]
    assert s.template_kinds() == ["uniform", "gaussian"]
    assert s.template_labels() == ["uniform", "Gaussian μ=8 σ=2"] == [describe(t) for t in s.template_specs()[0]]


def test_l0_is_the_priors_l0_and_solver_mass2_the_relaxation_mass():
    s = BFTSession(live=False, l0=0.25, solver_mass2=0.5, method="massive")
    cfg = s.to_config()
    assert cfg["prior"]["l0"] == 0.25 and cfg["solver"]["mass2"] == 0.5
    other = BFTSession(live=False)
    assert other.load_config(cfg) and other.l0 == 0.25 and other.solver_mass2 == 0.5
    assert s.param.l0.label == "mass m² (l0)" and "mass2" not in s.param


# ------------------------------------------------------------------ setups too large for a link (issue 25)
def long_document(nx=46, ny=71, seed=5) -> dict:
    """A density problem with an array template of nx x ny values of 12 significant digits: its link is longer than a
    link may be (each value about 14 characters and a percent-encoded comma)."""
    values = np.round(1.0 + np.random.default_rng(seed).random((nx, ny)), 12).tolist()
    return {"model": "density", "data": [[3, 3], [7, 12], [5, 8]],
            "grid": {"x": {"min": 1, "max": 10, "n": nx}, "y": {"min": 1, "max": 15, "n": ny}},
            "templates": [{"kind": "uniform"}, {"kind": "array", "values": values}], "weights": [0.5, 0.5]}


def test_a_setup_too_large_for_a_link_writes_no_link_longer_than_the_app_reads():
    from app.views.share import MAX_QUERY_CHARS, TOO_LONG_KEY, read_url, share_query, url_query
    s = BFTSession(live=False)
    assert s.load_config(long_document()), s.message
    full = url_query(s)
    assert len(full) > MAX_QUERY_CHARS
    query, chars = share_query(s)
    assert (query, chars) == (f"?{TOO_LONG_KEY}={len(full)}", len(full))
    # whoever opens it sees the defaults and is told why, and where the setup is
    other = BFTSession(live=False)
    read_url(other, query)
    assert other.to_config() == BFTSession(live=False).to_config()
    assert other.message.startswith(f"This link stands for a setup too large for a link ({len(full):,} characters)")
    assert "configuration file" in other.message
    # back under the limit (the menu's templates), the full link returns
    s.use_menu_templates()
    assert share_query(s) == (url_query(s), 0) and len(url_query(s)) <= MAX_QUERY_CHARS


def test_a_link_with_the_too_long_key_and_state_is_read_as_a_link():
    """Only the link share_query writes (the key alone) is the note: beside real parameters the key is unknown
    and ignored, as any other unknown key."""
    from app.views.share import read_url
    s = BFTSession(live=False)
    read_url(s, "?too_long=90000&lam=0.5")
    assert s.lam == 0.5 and s.message == ""
    read_url(s, "?too_long=<b>x</b>")
    assert s.message.startswith("This link stands for a setup too large for a link, so") and "<b>" not in s.message


def test_the_share_panel_offers_the_file_while_the_setup_is_too_large_and_the_file_restores_it():
    from app.views.share import SharePanel, load_upload, share_query, too_long_note
    s = BFTSession(live=False)
    assert s.load_config(long_document()), s.message
    s.solve()
    panel = SharePanel(session=s)
    assert panel.link_note.text == "" and not panel.link_note.pane.visible
    s.link_too_long = share_query(s)[1]  # what the served session's link writer sets
    assert panel.link_note.text == too_long_note(s.link_too_long) != "" and panel.link_note.pane.visible
    assert "Download configuration (JSON)" in panel.link_note.text
    raw = panel._config_file().getvalue()  # the Download button's file
    fresh = BFTSession(live=False)
    assert load_upload(fresh, raw.encode(), "bftcore-config.json"), fresh.message
    assert fresh.to_config() == s.to_config()
    s.link_too_long = 0
    assert panel.link_note.text == "" and not panel.link_note.pane.visible


def test_a_session_ended_while_its_worker_computes_closes_the_run_there_and_says_so(caplog):
    """Bokeh clears the document's session_context before it calls the session-destroyed hooks.  A session that
    then took itself for an unserved one closed its run's generator on the event loop while the worker thread was
    inside it: "generator already executing", the hook failed, and the session's memory stayed (on a loaded
    machine, where an iteration is often in flight, the memory test of tests/ui/test_hostile_links.py failed).
    The close must go to the worker thread, behind the iteration, and the server must log SESSION_RELEASED."""
    import logging
    import threading

    from bokeh.document import Document

    from app import runner
    from bftcore.api import validate_config

    class ServedDoc(Document):
        session_context = object()

    doc = ServedDoc()
    s = BFTSession(doc=doc)
    assert s.pump.start(validate_config(s.to_config()))
    inside, go, closed_on = threading.Event(), threading.Event(), []

    def held():
        try:
            inside.set()
            assert go.wait(60)
            yield None
        finally:
            closed_on.append(threading.current_thread().name)
    run = s.pump.run
    run.gen = held()
    computing = run.pool.submit(runner._next_record, run.gen)  # the runner's iteration, in flight
    assert inside.wait(60)
    doc.session_context = None   # what Bokeh's Document.destroy does before the hooks
    with caplog.at_level(logging.INFO, logger="app.runner"):
        s.close()                # must not raise "generator already executing"
        assert closed_on == [] and runner.SESSION_RELEASED not in caplog.text  # the iteration is still going
        go.set()
        computing.result(60)
        run.pool.submit(lambda: None).result(60)  # the pool serves in order: the close and the report are done
    assert closed_on and closed_on[0].startswith("bft-") and run.gen.gi_frame is None
    assert caplog.text.count(runner.SESSION_RELEASED) == 1
    assert s.record is None and s.history == []


def test_the_column_slice_shows_only_beside_a_heatmap():
    """p(y | x0) is a column of the heatmap: shown for a density on the (x, y) grid, hidden for a regression (y is
    real-valued: the side plots had an empty slice under every regression preset) and for a 1-D density (no x)."""
    from app.session import BFTSession
    from app.views.prior import PriorView
    s = BFTSession(live=False)
    view = PriorView(session=s)
    def shown() -> bool:
        return view.slice_panel().objects == [view.slice_pane]
    assert s.kind.drawn_as == "heatmap" and shown()
    assert s.load_preset("two_trends") and s.kind.drawn_as == "curve"
    assert view.slice_panel().objects == []
    assert s.load_preset("fig14") and shown()
    assert s.load_preset("old_faithful") and shown()
    s.param.update(nx=1, data=[[5.0, float(v)] for v in (3, 4, 4, 5, 9, 10)])
    assert s.kind.drawn_as == "density" and view.slice_panel().objects == []
