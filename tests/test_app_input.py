"""The dashboard's untrusted input (issue 11): share links and uploads are refused with a message that names what
was wrong, the session keeps what it had and stays usable, and closing a session lets go of its arrays."""
import json
import os
import sys
from urllib.parse import urlencode

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from app.state import MAX_POINTS, URL_PARAMS, BFTSession  # noqa: E402
from app.views.share import MAX_QUERY_CHARS, read_url, url_query  # noqa: E402
from bftcore.config import validate_config  # noqa: E402


def link(**q) -> str:
    return "?" + urlencode(q)


def opened(search: str) -> BFTSession:
    s = BFTSession(live=False)
    read_url(s, search)
    return s


def still_usable(s: BFTSession):
    validate_config(s.to_config())
    s.solve()
    assert s.record is not None and np.isfinite(s.record.energy)
    n = len(s.data)
    assert s.add_point(5.0, 5.0) and len(s.data) == n + 1


HOSTILE = [
    (dict(init="templatefoo"), "init", "kernel"),
    (dict(data="[[null,null]]"), "data", "two finite numbers"),
    (dict(extra_orders='{"l4":null}'), "extra_orders", "l4"),
    (dict(nx="5" * 5000), "nx", "whole number"),
    (dict(lam="-1"), "lam", "kept 1.0"),
    (dict(beta="0"), "beta", "kept 1.0"),
    (dict(nx="2000"), "nx", "at most 1024"),
    (dict(nx="1024", ny="1024"), "nx", "16 384"),
    (dict(nx="1024", ny="1024", model="density, prior on P", method="massive", solver_mass2="1"), "nx", "16 384"),
    (dict(data=json.dumps([[5, 5]] * 2500)), "data", f"at most {MAX_POINTS}"),
    (dict(lam="1e300"), "lam", "magnitude"),
    (dict(lam="nan"), "lam", "lam"),
    (dict(x_max="inf"), "x_max", "finite"),
    (dict(templates='["nonsense"]'), "templates", "templates"),
    (dict(file_templates='[{"kind": "array", "values": [[1e308]]}]'), "file_templates", "10 x 15"),
    (dict(data="[" * 5000 + "]" * 5000), "data", "nested"),
    (dict(init="template 5"), "init", "names no template"),
    (dict(preset="<script>alert(1)</script>"), "preset", "preset"),
    (dict(order_coef="1e11", order="l6"), "order_coef", "too stiff"),
]


@pytest.mark.parametrize("query, name, word", HOSTILE, ids=[h[1] + str(i) for i, h in enumerate(HOSTILE)])
def test_a_hostile_link_is_refused_by_name_and_the_session_stays_usable(query, name, word):
    s = opened(link(**query))
    assert s.message.startswith("From the link: ") and f"ignored {name}=" in s.message, s.message
    assert word in s.message, s.message
    still_usable(s)


def test_good_values_of_a_link_are_kept_beside_bad_ones():
    s = opened(link(lam="0.5", beta="0", data="[[3,3],[4,4]]"))
    assert s.lam == 0.5 and s.data == [[3, 3], [4, 4]] and s.beta == 1.0
    assert "ignored beta=0" in s.message and "lam" not in s.message.split("ignored beta")[0]


def test_a_link_too_long_is_not_read_and_says_so():
    s = opened(link(data="[" + ",".join(["[5, 5]"] * 12000) + "]"))
    assert len(link(data="x" * MAX_QUERY_CHARS)) > MAX_QUERY_CHARS
    assert "too long to load" in s.message and "Download configuration" in s.message
    assert s.data == [[3.0, 3.0], [7.0, 12.0]]
    still_usable(s)


def test_the_link_of_any_preset_round_trips_without_a_message():
    for name in ("fig15", "fig27", "metastable_mixture", "fig7", "two_trends"):
        s = BFTSession(live=False)
        assert s.load_preset(name)
        s.lam = 0.3
        other = opened(url_query(s))
        assert other.message == "" and validate_config(other.to_config()) == validate_config(s.to_config())


text_values = st.one_of(st.text(max_size=30), st.sampled_from(
    ["-1", "0", "1e308", "1e999", "nan", "-inf", "9" * 400, "[]", "{}", "[[1,2]]", "[[null,1]]", "[1,[2,[3]]]",
     '{"l4": -1}', '{"l9": 1}', '[{"kind": "gaussian", "mu": 1e300, "sigma": 1}]', "template 3", "true",
     "density, prior on P", "regression", "massive", "91×141", "as loaded (custom)", "[\"paper_t1\", \"linear\"]"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(URL_PARAMS), text_values, max_size=6))
def test_any_link_leaves_a_session_the_gate_accepts(query):
    s = opened(link(**query))
    validate_config(s.to_config())
    s.to_config()


# ---------------------------------------------------------------------------------------------- uploads
GRID = {"x": {"min": 1, "max": 10, "n": 10}, "y": {"min": 1, "max": 15, "n": 15}}
BAD_UPLOADS = [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"prior": {"lambda": ' + "9" * 400 + "}}", "prior.lambda"),
    ('{"prior": {"lambda": ' + "9" * 5000 + "}}", "prior.lambda"),
    ('{"beta": NaN}', "beta"),
    (b"\x89PNG\r\n\x1a\n\x00\x00garbage", "UTF-8"),
    (json.dumps({"templates": [{"kind": "array", "values": [[1e308] * 15] * 10}]}), "magnitude"),
    (json.dumps({"prior": {"field": "P"}, "solver": {"method": "massive", "mass2": 1},
                 "templates": [{"kind": "array", "values": [[-1.0] * 15] * 10}]}), "negative"),
    (json.dumps({"grid": {"x": {"min": 1, "max": 10, "n": 1024}, "y": {"min": 1, "max": 15, "n": 1024}}}),
     "16 384"),
    (json.dumps({"data": [[5, 5]] * 2001}), "at most 2000"),
    (json.dumps({"model": "regression", "grid": {"x": {"min": 0, "max": 1, "n": 5}},
                 "templates": [{"kind": "constant", "value": 0}]}), "mass"),
]


@pytest.mark.parametrize("raw, word", BAD_UPLOADS, ids=[str(i) for i in range(len(BAD_UPLOADS))])
def test_a_bad_upload_is_refused_and_nothing_changes(raw, word):
    s = BFTSession(live=False)
    s.param.update(lam=0.4, data=[[2.0, 2.0]])
    s.solve()
    before, record = s.to_config(), s.record
    assert not s.load_config(raw if isinstance(raw, bytes) else raw.encode())
    assert s.message.startswith("Refused the configuration: ") and "Nothing was changed." in s.message
    assert word in s.message, s.message
    assert s.to_config() == before and s.record is record
    still_usable(s)


def test_a_document_the_solver_cannot_start_is_refused_before_the_state_changes(monkeypatch):
    """The trial start: a document that passes the gate but fails while the solver builds its start."""
    from bftcore import api
    s = BFTSession(live=False)
    before = s.to_config()

    def broken(cfg, init=None):
        raise ValueError("cannot build this problem")
        yield  # pragma: no cover
    monkeypatch.setattr(api, "iterate", broken)
    assert not s.load_config(json.dumps({"data": [[3, 3]]}))
    assert "cannot build this problem" in s.message and s.to_config() == before


# ---------------------------------------------------------------------------------------------- sweeps, close
def test_a_sweep_over_the_budget_is_refused_with_a_message():
    s = BFTSession(live=False)
    assert s.load_preset("metastable_mixture")
    s.run_sweep(0.1, 10, 500)
    assert "Cannot sweep" in s.message and "200" in s.message and s.sweep is None


def test_close_drops_the_sessions_arrays():
    import gc
    import weakref
    s = BFTSession(live=False)
    s.solve()
    ref = weakref.ref(s.record.L)
    s.add_point(4.0, 4.0)
    s.close()
    gc.collect()
    assert s.record is None and s.history == [] and s._undo == []
    assert ref() is None


def _served(scenario):
    import asyncio

    from bokeh.document import Document

    class ServedDoc(Document):
        session_context = object()

        def add_next_tick_callback(self, fn):
            asyncio.get_event_loop().call_soon(fn)

    return asyncio.run(scenario(BFTSession(doc=ServedDoc())))


def test_a_run_over_the_servers_compute_budget_is_stopped_with_its_last_iteration_shown(monkeypatch):
    import asyncio

    import app.state as state
    monkeypatch.setattr(state, "RUN_COMPUTE_S", 0.0)  # every iteration takes longer than that

    async def scenario(s):
        s.start_run(warm=False, play=True)
        for _ in range(500):
            if not s.running and s.message:
                break
            await asyncio.sleep(0.01)
        return s
    s = _served(scenario)
    assert "Stopped this run after" in s.message and "limit per run" in s.message
    assert not s.running and not s.converged
    # the iteration it reached (here the start: iteration 0 already took longer than 0 s) is on screen
    assert s.record is not None and s.history and s.history[-1]["iteration"] == s.record.iteration


def test_heavy_and_light_runs_use_their_own_worker_pools():
    from app.state import _HEAVY_POOL, _LIGHT_POOL

    async def scenario(s):
        s.start_run(warm=False, play=False)
        light = s._run.pool
        s.param.update(grid_size="as loaded (custom)", nx=128, ny=128)
        return light, s._run.pool
    light, heavy = _served(scenario)
    assert light is _LIGHT_POOL and heavy is _HEAVY_POOL
