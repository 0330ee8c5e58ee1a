"""Headless tests of the dashboard's session model (app/state.py): no browser, no server."""
import json

import numpy as np
import pytest

pytest.importorskip("panel")

from app.state import BFTSession, MAX_POINTS, preset_catalogue  # noqa: E402


@pytest.fixture
def session():
    s = BFTSession()
    s.solve()
    return s


def test_default_state_solves_and_normalises(session):
    P, g = session.record.P, session.grid
    assert session.converged
    assert np.allclose(P.sum(axis=1) * g.hy, 1.0, atol=1e-8)
    energies = [h["energy"] for h in session.history]
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
    assert session.history[0]["iteration"] == 0 and session.converged
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
    run, energy = session.run_id, session.history[-1]["energy"]
    train = session.history[-1]["train_error"]
    session.lam = 3.0
    assert session.run_id == run + 1
    assert session.to_config()["prior"]["lambda"] == 3.0
    assert session.history[-1]["energy"] != pytest.approx(energy)
    # warm start: the first record of the new run is the previous solution, not the kernel start
    assert session.history[0]["train_error"] == pytest.approx(train, abs=1e-10)


def test_warm_start_begins_at_the_previous_field(session):
    P_old = session.record.P.copy()
    session.live = False
    session.lam = 2.0
    session.start_run(warm=True, play=False)  # shows iteration 0 only
    assert session.history[-1]["iteration"] == 0
    assert np.allclose(session.record.P, P_old, atol=1e-10)
    session.reset(play=False)  # a reset goes back to the configured (kernel) start
    assert not np.allclose(session.record.P, P_old, atol=1e-6)


def test_step_pause_and_run(session):
    session.live = False
    session.reset(play=False)
    assert [h["iteration"] for h in session.history] == [0]
    session.step()
    session.step()
    assert [h["iteration"] for h in session.history] == [0, 1, 2]
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
    mine, theirs = validate_config(s.to_config()), validate_config(doc)
    assert mine["prior"] == theirs["prior"] and mine["templates"] == theirs["templates"]
    assert mine["solver"]["method"] == theirs["solver"]["method"] and mine["beta"] == pytest.approx(theirs["beta"])
    assert s.converged and len(s.history) >= 2


@pytest.mark.parametrize("bad", [
    b"{not json",
    json.dumps({"model": "density", "prior": {"lambda": -1}}),
    json.dumps({"model": "density", "data": [[30, 3]]}),
    json.dumps([1, 2, 3]),
    json.dumps({"model": "density", "grid": {"x": {"min": 1, "max": 10, "n": 7, "boundary": "periodic"}}}),
])
def test_bad_upload_is_refused_and_state_unchanged(session, bad):
    before = (session.to_config(), session.run_id, session.record)
    assert not session.load_config(bad)
    assert session.message.startswith("Refused the configuration")
    assert (session.to_config(), session.run_id, session.record) == before


def test_solver_failure_keeps_last_good_solution(session, monkeypatch):
    import bftcore.api

    def broken(config, init=None):
        raise FloatingPointError("boom")
        yield  # pragma: no cover

    good = session.record
    monkeypatch.setattr(bftcore.api, "iterate", broken)
    session.lam = 2.0
    assert "solver failed" in session.message and session.record is good


def test_csv_export(session):
    lines = session.data_csv().strip().splitlines()
    assert lines[0] == "x,y" and len(lines) == 1 + len(session.data)


def test_sessions_share_nothing():
    a, b = BFTSession(live=False), BFTSession(live=False)
    a.add_point(5, 5)
    assert b.data == [[3.0, 3.0], [7.0, 12.0]]
    assert a.data is not b.data
