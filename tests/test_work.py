"""The session's background work (app/work.py): one task per key, the newest request kept or a second refused,
cancellation, the time budget, the lanes' waiting, the session's end, and the calls to a served document; and that
the dashboard starts no thread of its own anywhere else."""
import asyncio
import pathlib
import re
import threading
import time

import pytest

from app import work
from app.work import Background, Lane
from bftcore.foundations.limits import RunBudgetExceeded, check_deadline


class _Pump:
    """What Background reads of the session's FramePump: served or not, and the document."""

    def __init__(self, doc=None):
        self.doc, self.served = doc, doc is not None


def ended(bg, key, timeout=60):
    assert bg.wait(key, timeout)


def test_a_task_runs_on_its_lane_and_its_end_reaches_the_session():
    bg, seen = Background(_Pump()), []
    task = bg.start("k", lambda t: threading.current_thread().name, lambda t, r: seen.append((t.outcome, r)))
    ended(bg, "k")
    assert task.finished.is_set() and seen == [("complete", seen[0][1])]
    assert seen[0][1].startswith("bft-heavy")
    assert bg.running("k") is None


def test_a_request_while_one_runs_waits_and_only_the_newest_is_computed():
    bg, go, results = Background(_Pump()), threading.Event(), []
    first = bg.start("k", lambda t: (go.wait(60), "first")[1], lambda t, r: results.append(r))
    assert first is not None
    for name in ("second", "third"):
        assert bg.start("k", lambda t, name=name: name, lambda t, r: results.append(r)) is None
    go.set()
    ended(bg, "k")
    assert results == ["first", "third"]


def test_a_refused_request_changes_nothing():
    bg, go, results = Background(_Pump()), threading.Event(), []
    assert bg.start("k", lambda t: (go.wait(60), 1)[1], lambda t, r: results.append(r), if_busy="refuse")
    assert bg.start("k", lambda t: 2, lambda t, r: results.append(r), if_busy="refuse") is None
    go.set()
    ended(bg, "k")
    assert results == [1]


def test_a_cancelled_task_ends_cancelled_and_nothing_it_reports_arrives():
    bg, inside, go, reported, ends = Background(_Pump()), threading.Event(), threading.Event(), [], []

    def slow(task):
        inside.set()
        go.wait(60)
        bg.call(task, reported.append, "late")  # after the cancel: not applied
        return "result"
    task = bg.start("k", slow, lambda t, r: ends.append((t.outcome, r)))
    assert inside.wait(60)
    assert bg.cancel("k") is task and task.cancelled.is_set()
    assert bg.cancel("k") is None  # once
    go.set()
    ended(bg, "k")
    assert reported == [] and ends == [("cancelled", "result")]


def test_the_time_budget_ends_a_task_with_the_budget_error():
    bg, ends = Background(_Pump()), []

    def forever(task):
        while True:
            check_deadline()  # what every solver iteration does
            time.sleep(0.01)
    bg.start("k", forever, lambda t, r: ends.append((t.outcome, r)), budget_s=0.05)
    ended(bg, "k")
    assert ends[0][0] == "failed" and isinstance(ends[0][1], RunBudgetExceeded)


def test_a_task_that_finds_every_thread_of_its_lane_taken_says_that_it_waits():
    lane, hold, waited, ends = Lane("test-lane", 1), threading.Event(), [], []
    lane.submit(lambda: hold.wait(60))
    bg = Background(_Pump())
    bg.start("k", lambda t: "done", lambda t, r: ends.append(r), lane=lane, on_wait=lambda t: waited.append(t.key))
    assert waited == ["k"] and ends == []
    hold.set()
    ended(bg, "k")
    assert ends == ["done"] and lane.busy == 0


def test_the_end_of_the_session_cancels_every_task_and_starts_no_new_one():
    bg, go, ends = Background(_Pump()), threading.Event(), []
    task = bg.start("k", lambda t: go.wait(60), lambda t, r: ends.append(t.outcome))
    queued = bg.start("k", lambda t: "never", lambda t, r: ends.append("queued ran"))
    assert queued is None
    bg.close()
    assert task.cancelled.is_set()
    assert bg.start("other", lambda t: 1, lambda t, r: ends.append("other ran")) is None
    go.set()
    assert task.wait(60)
    assert ends == ["cancelled"]


def test_at_most_max_tasks_of_one_session_at_once():
    bg, go = Background(_Pump()), threading.Event()
    lane = Lane("test-many", work.MAX_TASKS + 1)
    tasks = [bg.start(f"k{j}", lambda t: go.wait(60), lambda t, r: None, lane=lane) for j in range(work.MAX_TASKS)]
    assert all(tasks)
    assert bg.start("one more", lambda t: 1, lambda t, r: None, lane=lane) is None
    go.set()
    for j in range(work.MAX_TASKS):
        ended(bg, f"k{j}")


class _Doc:
    """A served document: next-tick callbacks run on the event loop, as Bokeh's do."""

    def __init__(self, loop):
        self.loop, self.ticks = loop, 0

    def add_next_tick_callback(self, fn):
        self.ticks += 1
        self.loop.call_soon_threadsafe(fn)


def test_served_every_call_goes_through_the_documents_next_tick_on_its_thread(monkeypatch):
    monkeypatch.setattr(work, "one_message", lambda doc: _null())
    monkeypatch.setattr(work, "set_curdoc", lambda doc: _null())

    async def scenario():
        doc = _Doc(asyncio.get_running_loop())
        bg, threads = Background(_Pump(doc)), []

        def job(task):
            bg.call(task, lambda: threads.append(threading.current_thread().name))
            return 42
        done = asyncio.Event()
        bg.start("k", job, lambda t, r: (threads.append((threading.current_thread().name, r)), done.set()))
        await asyncio.wait_for(done.wait(), 60)
        value = await bg.compute(lambda a, b: a * b, 6, 7)
        with pytest.raises(ZeroDivisionError):
            await bg.compute(lambda: 1 / 0)
        return doc, threads, value
    doc, threads, value = asyncio.run(scenario())
    main = threading.current_thread().name
    assert threads == [main, (main, 42)] and doc.ticks == 2 and value == 42


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_dashboard_starts_threads_only_through_the_runner_and_the_background_work():
    """One background mechanism (issue 26): no view or other module of the app makes a thread, a pool or an
    executor call of its own."""
    app = pathlib.Path(__file__).resolve().parents[1] / "app"
    pattern = re.compile(r"threading\.Thread\(|ThreadPoolExecutor\(|ProcessPoolExecutor\(|multiprocessing\.|"
                         r"run_in_executor\(|asyncio\.to_thread\(")
    own = {"runner.py", "work.py", "harness.py"}  # the harness drives tests and load scripts, not the dashboard
    offenders = [str(p.relative_to(app)) for p in app.rglob("*.py")
                 if p.name not in own and pattern.search(p.read_text())]
    assert offenders == []


def test_low_priority_work_runs_in_a_niced_child_process_and_each_result_comes_back():
    """The server's warm-up (app/app_hooks.py) runs in a child process at the lowest priority, not on a lane of
    this process: os.nice(0) answers the niceness of the process it runs in."""
    import os
    got, done = {}, threading.Event()

    def on_result(item, result):
        got[item] = result
        done.set()
    work.at_low_priority(os.nice, [0], on_result)
    assert done.wait(120)
    assert got == {0: 19}
    assert os.nice(0) != 19  # not this process


ORPHAN_SCRIPT = """
import os, sys, time
from app import work
work.at_low_priority(time.sleep, [60.0], lambda item, result: None)
time.sleep(3.0)   # the child has started and sleeps
me = str(os.getpid())
def parent(d):
    try:
        return open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1]
    except OSError:   # a process that ended meanwhile
        return ""
kids = [d for d in os.listdir("/proc") if d.isdigit() and parent(d) == me]
print(" ".join(kids), flush=True)
os._exit(0)       # the server killed: no pool shutdown, no atexit
"""


def _gone(pid: str) -> bool:
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "zombie" in status.lower()


@pytest.mark.skipif(not pathlib.Path("/proc/self/stat").exists(), reason="reads the process table in /proc")
def test_a_low_priority_child_ends_when_its_server_is_killed(tmp_path):
    """A server killed by a signal does not shut its warm-up pool down: the child ends by itself within a few
    seconds of its parent (a child of a classroom worker stopped by ``--stop`` was found alive 30 minutes later,
    sleeping on a parent that no longer existed).  Here the child sleeps 60 s and must be gone long before."""
    import subprocess
    import sys
    root = pathlib.Path(__file__).resolve().parents[1]
    with open(tmp_path / "out", "w") as out:   # a file, not a pipe: a child left alive would hold a pipe open
        subprocess.run([sys.executable, "-c", ORPHAN_SCRIPT], cwd=root, stdout=out, stderr=subprocess.STDOUT,
                       timeout=120)
    kids = [k for k in (tmp_path / "out").read_text().split() if k.isdigit()]
    assert kids, (tmp_path / "out").read_text()   # the pool's child (and its resource tracker) were found
    deadline = time.monotonic() + 15.0
    while time.monotonic() < deadline and not all(_gone(k) for k in kids):
        time.sleep(0.2)
    assert all(_gone(k) for k in kids), [pathlib.Path(f"/proc/{k}/cmdline").read_text() for k in kids
                                         if not _gone(k)]


def test_a_failed_low_priority_call_is_logged_and_the_others_still_come_back(caplog):
    import math
    got, done = {}, threading.Event()

    def on_result(item, result):
        got[item] = result
        done.set()
    work.at_low_priority(math.sqrt, [-1.0, 4.0], on_result)
    assert done.wait(120)
    assert got == {4.0: 2.0}
    assert any("warm-up of -1.0 failed" in r.getMessage() for r in caplog.records)


def test_a_preset_chosen_by_the_warm_up_is_not_computed_again(monkeypatch):
    from app import session
    name = session.presets_to_choose()[0]
    monkeypatch.setattr(session, "_CHOSEN", {})
    chosen = ({"marker": 1}, {"lam": 2.0})
    session.remember_chosen(name, chosen)
    monkeypatch.setattr(session.api, "choose_preset", lambda name: pytest.fail("computed again"))
    assert session._chosen_preset(name) is chosen
    assert session.preset_document(name) == chosen and session.preset_document(name) is not chosen
