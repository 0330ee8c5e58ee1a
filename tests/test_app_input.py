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

from app.configuration import MAX_POINTS, URL_PARAMS
from app.session import BFTSession, preset_catalogue  # noqa: E402
from app.views.share import MAX_QUERY_CHARS, read_url, url_query  # noqa: E402
from bftcore.foundations.config import validate_config  # noqa: E402


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
    (dict(nx="1024", ny="1024"), "nx", "ny=1024 (a grid 1024 x 1024 of 1 048 576 nodes exceeds the limit of 16 384"),
    (dict(nx="1024", ny="1024", model="density, prior on P", method="massive", solver_mass2="1"), "nx",
     "kept nx=10, ny=15"),
    (dict(data=json.dumps([[5, 5]] * 2500)), "data", f"at most {MAX_POINTS}"),
    (dict(lam="1e300"), "lam", "at most 1000000000000.0, not 1e+300"),
    (dict(gauss_mu="1e300"), "gauss_mu", "Gaussian centre"),  # not in use, but never held by the session
    (dict(lam="nan"), "lam", "lam"),
    (dict(x_max="inf"), "x_max", "not inf"),
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


def test_a_links_grid_is_kept_or_refused_as_a_whole():
    """Value by value, nx=1024 alone fits the node budget beside the kept ny=15, and x_min=20 alone is past the
    kept x_max: the grid of a link is judged as one."""
    s = opened(link(nx="1024", ny="1024", lam="1e300"))
    assert (s.nx, s.ny) == (10, 15) and "ignored nx=1024, ny=1024 (" in s.message
    s = opened(link(x_min="20", x_max="30", data="[[25, 5]]", lam="1e300"))
    assert (s.x_min, s.x_max, s.data) == (20, 30, [[25, 5]]) and "ignored lam=" in s.message
    assert "x_min" not in s.message
    s.solve()
    assert s.record is not None and s.add_point(25.0, 8.0)


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
     "density, prior on P", "regression", "massive", "91×141", "as loaded (custom)", "[\"paper_t1\", \"linear\"]",
     # preset names: a link's preset supplies the values it does not give, the hostile ones among them included
     "fig21", "two_trends", "metastable_mixture", "fig7"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(URL_PARAMS), text_values, max_size=6))
def test_any_link_leaves_a_session_the_gate_accepts(query):
    s = opened(link(**query))
    validate_config(s.to_config())
    s.to_config()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(preset_catalogue())),
       st.dictionaries(st.sampled_from([n for n in URL_PARAMS if n != "preset"]), text_values, max_size=4))
def test_a_link_naming_a_preset_with_any_other_values_leaves_a_session_the_gate_accepts(name, query):
    s = opened(link(preset=name, **query))
    validate_config(s.to_config())
    # the preset's name stays only if the state is exactly the preset
    if s.preset:
        loaded = BFTSession(live=False)
        assert loaded.load_preset(name)
        assert validate_config(s.to_config()) == validate_config(loaded.to_config())


any_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-10 ** 400, max_value=10 ** 400), st.floats(),
              st.text(max_size=20), st.sampled_from(["template 3", "template 17", "keep current", "l4", "kind"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["l2", "l4", "l9", "kind",
                                                                                          "mu"]), inner, max_size=3)),
    max_leaves=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(URL_PARAMS), any_value), max_size=8))
def test_no_value_a_parameter_accepts_breaks_to_config(changes):
    """Whatever is set on a session, directly and in any order, is either refused by the parameter (ValueError or
    TypeError, the session unchanged) or held in a form to_config turns into a document without raising."""
    s = BFTSession(live=False)
    for name, value in changes:
        try:
            setattr(s, name, value)
        except (ValueError, TypeError):
            pass
        s.to_config()


# ---------------------------------------------------------------------------------------------- uploads
GRID = {"x": {"min": 1, "max": 10, "n": 10}, "y": {"min": 1, "max": 15, "n": 15}}
BAD_UPLOADS = [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"prior": {"lambda": ' + "9" * 400 + "}}", "prior.lambda"),
    ('{"prior": {"lambda": ' + "9" * 5000 + "}}", "prior.lambda"),
    ('{"beta": NaN}', "beta"),
    (b"\x89PNG\r\n\x1a\n\x00\x00garbage", "UTF-8"),
    (b"", "not valid JSON"),
    (b"PK\x03\x04\x14\x00\x00\x00\x08\x00", "not valid JSON"),
    (b"drwxr-xr-x 2 root root 4096 .\n", "not valid JSON"),
    (b"[1, 2, 3]", "JSON object"),
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


@pytest.mark.parametrize("error", [ValueError, RuntimeError, MemoryError, RecursionError])
def test_a_document_the_solver_cannot_start_is_refused_before_the_state_changes(monkeypatch, error):
    """The trial start: a document that passes the gate but fails while the solver builds its start, with any
    exception (scipy's factorisations raise RuntimeError on a singular matrix)."""
    from app import runner
    s = BFTSession(live=False)
    before = s.to_config()

    def broken(cfg, init=None):
        raise error("cannot build this problem")
        yield  # pragma: no cover
    monkeypatch.setattr(runner, "iterate", broken)
    assert not s.load_config(json.dumps({"data": [[3, 3]]}))
    assert s.message.startswith("Refused the configuration: ") and s.message.endswith("Nothing was changed.")
    assert s.to_config() == before


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

    import app.runner as runner
    monkeypatch.setattr(runner, "RUN_COMPUTE_S", 0.0)  # every iteration takes longer than that

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
    assert s.record is not None and s.history and s.history[-1].iteration == s.record.iteration


def test_heavy_and_light_runs_use_their_own_worker_pools():
    from app.runner import _HEAVY_POOL, _LIGHT_POOLS

    async def scenario(s):
        s.start_run(warm=False, play=False)
        light = s.pump.run.pool
        s.param.update(grid_size="as loaded (custom)", nx=128, ny=128)
        return light, s.pump.run.pool
    light, heavy = _served(scenario)
    assert light in _LIGHT_POOLS and heavy is _HEAVY_POOL


def test_a_served_run_is_advanced_and_closed_on_one_thread(monkeypatch):
    """scipy's SuperLU frees a factorisation only on the thread that made it (scipy issue 15921): every iteration of a
    served run and the close of its generator, when the run is replaced or the session ends, happen on the run's
    own worker thread."""
    import asyncio
    import threading

    import app.runner as runner
    seen = []
    timed_next, close_generator = runner._timed_next, runner._close_generator

    def traced_next(gen):
        seen.append(("next", gen, threading.current_thread().name))  # the generator itself: ids are reused
        return timed_next(gen)

    def traced_close(gen, release):
        seen.append(("close", gen, threading.current_thread().name))
        close_generator(gen, release)
    monkeypatch.setattr(runner, "_timed_next", traced_next)
    monkeypatch.setattr(runner, "_close_generator", traced_close)

    async def scenario(s):
        s.start_run(warm=False, play=True)
        for k in range(4):
            await asyncio.sleep(0.05)
            s.lam = 0.5 + k  # a new run replaces the one playing
        await asyncio.sleep(0.05)
        s.close()
        loop = asyncio.get_running_loop()
        for pool in runner._LIGHT_POOLS + [runner._HEAVY_POOL]:  # wait for the closes queued on every thread
            await loop.run_in_executor(pool, lambda: None)
    _served(scenario)
    closed = [g for what, g, _ in seen if what == "close"]
    advanced = [g for g in closed if any(g2 is g for what, g2, _ in seen if what == "next")]
    assert len(closed) == 5 and len(advanced) >= 3  # a run replaced before its first iteration was never advanced
    for g in advanced:
        threads = {t for _, g2, t in seen if g2 is g}
        assert len(threads) == 1 and threads != {threading.main_thread().name}, threads


def test_an_old_link_with_mass2_sets_l0():
    """Share links are a public contract: mass2= was the prior's l0 before the parameter was renamed."""
    s = opened(link(mass2="0.3"))
    assert s.l0 == 0.3 and not s.message and s.to_config()["prior"]["l0"] == 0.3 and s.solver_mass2 == 0.01
    assert "l0=0.3" in url_query(s) and "mass2=0.3" not in url_query(s)
    both = opened(link(mass2="0.3", l0="0.7"))
    assert both.l0 == 0.7
    bad = opened(link(mass2="-1"))
    assert bad.l0 == 0.0 and "l0=-1" in bad.message


def test_a_document_with_a_free_boundary_loads_and_a_free_x_for_a_density_is_explained():
    """The gate accepts boundary "free" (DEFT's operator) on a density's y axis; the session's selectors must too,
    or loading such a file would fail half-way.  On a density's x axis the run says why it cannot solve."""
    s = BFTSession(live=False)
    doc = {"grid": {"y": {"min": -4, "max": 4, "n": 60, "boundary": "free"}}, "data": [0.1, 0.5, -1.0, 2.0],
           "prior": {"l2": 0, "l6": 1, "lambda": 0.1}}
    assert s.load_config(json.dumps(doc)), s.message
    assert s.boundary_y == "free" and s.to_config()["grid"]["y"]["boundary"] == "free"
    s2 = BFTSession(live=False)
    s2.boundary_x = "free"
    s2.reset(play=False)
    assert "for the y axis of a density" in s2.message


# ------------------------------------------------------------------- repeated link keys, upload sizes (issue 25)
def test_a_repeated_link_key_is_read_with_its_last_value_and_the_message_says_so():
    s = opened("?lam=0.5&lam=7&beta=2")
    assert s.lam == 7.0 and s.beta == 2.0
    assert s.message == "From the link: lam is given 2 times; used the last, lam=7.", s.message
    # the last value is judged like any other: a refused one is named too, and the one before it is not used
    s = opened("?lam=0.5&lam=-1")
    assert s.lam == 1.0 and "lam is given 2 times; used the last, lam=-1" in s.message
    assert "ignored lam=-1" in s.message
    assert opened("?lam=0.5&beta=2").message == ""


def test_a_link_key_given_many_times_is_cut_in_the_note():
    s = opened("?" + "&".join(f"display={'x' * 80}{k}" for k in range(3)))
    assert "display is given 3 times; used the last, display=" + "x" * 40 + "..." in s.message, s.message


def share_panel(s):
    from app.views.share import SharePanel
    return SharePanel(session=s)


def solved(**values) -> BFTSession:
    s = BFTSession(live=False)
    s.param.update(**values)
    s.solve()
    return s


@pytest.mark.parametrize("size", [0, None])
def test_an_upload_refused_in_the_page_for_its_size_gets_a_message_and_nothing_changes(size):
    """What the page sends for a file that is empty or over the limit: its name and size, not its content."""
    from app.views.share import MAX_UPLOAD_BYTES
    size = MAX_UPLOAD_BYTES + 1 if size is None else size
    s = solved(lam=0.4, data=[[2.0, 2.0]])
    before, record = s.to_config(), s.record
    share_panel(s).upload._handle_msg({"name": "mine.json", "size": size})
    assert s.message.startswith("Refused mine.json: ") and "Nothing was changed." in s.message, s.message
    assert ("empty" in s.message) == (size == 0)
    assert ("over the upload limit of 10 MiB" in s.message) == (size > 0)
    assert s.to_config() == before and s.record is record
    still_usable(s)


def test_the_server_checks_the_size_of_an_upload_again():
    """A page is not trusted: content over the limit is refused without being decoded, and so is content that is
    not base64."""
    import base64

    from app.views.share import MAX_UPLOAD_BYTES
    s = solved()
    before = s.to_config()
    upload = share_panel(s).upload
    upload._handle_msg({"name": "big.csv", "size": 3, "data": "A" * (4 * MAX_UPLOAD_BYTES // 3 + 8)})
    assert s.message.startswith("Refused big.csv: ") and "over the upload limit" in s.message, s.message
    s.message = ""
    upload._handle_msg({"name": "junk.csv", "size": 3, "data": "not base64 at all!"})
    assert s.message.startswith("Refused junk.csv: the browser could not read or send it"), s.message
    s.message = ""
    upload._handle_msg({"name": "gone.csv", "size": 3, "unreadable": True})  # the page's FileReader failed
    assert s.message.startswith("Refused gone.csv: the browser could not read or send it"), s.message
    upload._handle_msg(["not", "a", "message"])
    assert s.to_config() == before
    # a file at the limit is read (here: a table with one point per line, padded with blank lines to the limit)
    table = b"x,y\n2,3\n4,5\n"
    raw = table + b"\n" * (MAX_UPLOAD_BYTES - len(table))
    upload._handle_msg({"name": "at-limit.csv", "size": len(raw), "data": base64.b64encode(raw).decode()})
    assert s.message.startswith("Loaded 2 points from at-limit.csv"), s.message[:200]
    assert s.data == [[2.0, 3.0], [4.0, 5.0]]


def test_an_empty_upload_is_refused_by_name_whatever_way_it_comes():
    """Refused by the page (its size alone), or sent empty all the same."""
    s = solved(data=[[2.0, 2.0]])
    before = s.to_config()
    upload = share_panel(s).upload
    for msg in ({"name": "empty.csv", "size": 0}, {"name": "empty.csv", "size": 0, "data": ""},
                {"name": "empty.csv", "size": 5, "data": ""}):
        s.message = ""
        upload._handle_msg(msg)
        assert s.message.startswith("Refused empty.csv: the file is empty."), s.message
    upload._handle_msg({"name": "", "size": 0})
    assert s.message.startswith("Refused the file: the file is empty"), s.message
    assert s.to_config() == before


def test_the_same_file_uploaded_twice_is_loaded_twice():
    """The page sends every choice of a file; the second, equal to the first, is loaded again (after an edit)."""
    s = solved()
    upload = share_panel(s).upload
    upload.receive("two.csv", b"x,y\n2,3\n4,5\n")
    assert s.add_point(3.0, 4.0) and len(s.data) == 3, s.message
    upload.receive("two.csv", b"x,y\n2,3\n4,5\n")
    assert s.data == [[2.0, 3.0], [4.0, 5.0]] and s.message.startswith("Loaded 2 points from two.csv")


def test_an_upload_message_keeps_the_file_name_as_text():
    """The name is the user's (or an attacker's): it reaches the message as written, cut to 60 characters, and the
    message line shows it as text (app.views.common.LiveText)."""
    s = solved()
    name = "<img src=x onerror=alert(1)>" + "a" * 80 + ".csv"
    share_panel(s).upload._handle_msg({"name": name, "size": 0})
    assert s.message.startswith(f"Refused {name[:60]}...: the file is empty"), s.message
