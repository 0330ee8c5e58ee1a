"""Background work of a session: the one mechanism for everything a session computes besides the frames of its
solver run (those are :mod:`app.runner`'s): the evidence path, the beta sweep, the learning curve (and its
bootstrap), the PNG export.

A *task* (:class:`Task`) is ``work(task)`` computed on a worker thread of a *lane* (:class:`Lane`), within a time
budget (:func:`bftcore.foundations.limits.deadline`), then ``done(task, result)`` on the session: the result, or the
exception that ended the work.  What the work hands to the page while it runs (progress, a partial result) goes through
:meth:`Background.call` or, throttled, :meth:`Background.report`; on a served session that is the document's next
tick, under Bokeh's lock and as one websocket message (:func:`app.transport.one_message`), never a change of a
model from the worker thread.  Without a server (tests, notebooks) the same calls are made at once from the worker
thread under the session's work lock.

Each session owns one :class:`Background` (``BFTSession.work``), and the state a task produces lives in the session
(``evidence``, ``sweep``, ``learning``, their progress and notes): a view only draws it.

- **One task per key** (``"evidence"``, ``"sweep"``, ``"learning"``, ``"export"``).  A request for a key whose task
  runs is either kept and started when it ends (``if_busy="latest"``: the newest request only, so a burst of clicks
  costs two computations, not one per click) or refused (``if_busy="refuse"``: :meth:`Background.start` returns
  None).  At most :data:`MAX_TASKS` tasks of one session run at once.
- **Cancellation**: :meth:`Background.cancel` sets the task's ``cancelled`` event, which the work polls (bftcore's
  long computations take a ``cancel`` callable); nothing of a cancelled task reaches the session but its end.  The
  end of the browser session cancels every task (:meth:`Background.close`).
- **Lanes** are shared by all the sessions of the server.  :data:`HEAVY` is the one thread that the heavy solver
  runs use too (in turn across sessions: the evidence path, the sweep and the export are short, a few seconds at
  most).  :data:`LONG` has :data:`LONG_SLOTS` threads for the learning curves, which take one core each for up to
  a minute; a task that finds them all busy waits, and its ``on_wait`` tells the page so.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, Callable, Iterable

from panel.io.state import set_curdoc

from bftcore.foundations.limits import deadline

from .transport import one_message

#: Tasks of one session running at once (one per key; the keys are the session's own, so this is a safeguard).
MAX_TASKS = 4
#: Learning curves (and bootstraps) computed at once in the whole server: each takes one core while it runs.
LONG_SLOTS = 2
#: Shortest time between two throttled reports of one task to the page (:meth:`Background.report`).
PROGRESS_S = 0.25


class Lane:
    """Worker threads shared by every session of the server, and how many tasks are in them (queued or running)."""

    def __init__(self, name: str, workers: int, executor: ThreadPoolExecutor | None = None):
        self.name, self.workers = name, workers
        self.executor = executor or ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"bft-{name}")
        self._lock = threading.Lock()
        self.busy = 0

    def submit(self, fn: Callable[[], None]) -> bool:
        """Queue ``fn`` on the lane; True when every thread is taken (``fn`` waits for one)."""
        with self._lock:
            waits = self.busy >= self.workers
            self.busy += 1

        def run():
            try:
                fn()
            finally:
                with self._lock:
                    self.busy -= 1
        self.executor.submit(run)
        return waits


#: The heavy lane: one thread, shared with the heavy solver runs of :mod:`app.runner`.
HEAVY = Lane("heavy", 1)
#: The lane of the learning curves.
LONG = Lane("long", LONG_SLOTS)

log = logging.getLogger(__name__)


def _orphan_watch(parent: int, every_s: float = 1.0) -> None:
    """In a warm-up child: end this process as soon as its parent is gone.  A server stopped by a signal (the
    classroom's ``--stop``, a supervisor's restart) does not shut its pool down, and the niced child went on to the
    end of its items and then waited for a parent that no longer read its results (found alive half an hour after
    ``classroom.sh --stop``)."""
    while True:
        time.sleep(every_s)
        if os.getppid() != parent:
            os._exit(0)


def _low_priority_child(parent: int) -> None:
    """The warm-up child's initializer: the lowest CPU priority, and a watch that ends it with its parent."""
    os.nice(19)
    threading.Thread(target=_orphan_watch, args=(parent,), daemon=True, name="bft-orphan-watch").start()


def at_low_priority(fn: Callable[[Any], Any], items: Iterable, on_result: Callable[[Any, Any], None]) -> None:
    """``fn(item)`` for each item in one child process at the lowest CPU priority (``os.nice(19)``), then
    ``on_result(item, result)`` in this process (on the pool's thread) as each one ends; the child ends after the
    last.  For the server's own warm-up (:func:`app.app_hooks.on_server_loaded`): a thread of this process would
    hold the interpreter's lock against the first pages (the preset warm-up took 5 s of CPU at start while the
    first page was being built, issue 28), whereas the system schedules a niced process only on a core the server
    and the browser leave idle.  ``fn`` must be importable by name (a spawned child imports it); a child that fails
    is logged and its items are computed on demand, as without warm-up."""
    items = list(items)
    try:
        pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_low_priority_child, initargs=(os.getpid(),))
    except (OSError, ValueError) as e:  # no process can be started here: warm nothing
        log.warning("no warm-up process: %s", e)
        return

    def deliver(item, future: Future) -> None:
        try:
            on_result(item, future.result())
        except Exception as e:  # noqa: BLE001  (the warm-up is an optimisation: a failure is logged, never raised)
            log.warning("warm-up of %r failed: %s", item, e)
    for item in items:
        pool.submit(fn, item).add_done_callback(functools.partial(deliver, item))
    pool.shutdown(wait=False)  # the submitted calls still run; the child exits after the last


class Task:
    """One piece of background work: its key, its cancel flag and how it ended (``outcome``: ``"complete"``,
    ``"cancelled"`` or ``"failed"``, set before ``done`` is called)."""

    def __init__(self, key: str):
        self.key = key
        self.cancelled = threading.Event()
        self.finished = threading.Event()  # set once done(task, result) has been applied on the session
        self.outcome = ""
        self.reported_at = 0.0

    def cancel(self) -> None:
        self.cancelled.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the task's end has been applied on the session (tests, scripts, notebooks)."""
        return self.finished.wait(timeout)


class Background:
    """The background work of one session (see the module's text).  ``pump`` is the session's
    :class:`app.runner.FramePump`, which knows whether the session is served and its document."""

    def __init__(self, pump):
        self.pump = pump
        self.lock = threading.RLock()           # held while a call is applied without a server
        self.tasks: dict[str, Task] = {}        # the task running (or queued on its lane) per key
        self._next: dict[str, tuple] = {}       # the newest request waiting per key (if_busy="latest")
        self.closed = False

    # -------------------------------------------------------------------------------------------- starting
    def start(self, key: str, work: Callable[[Task], Any], done: Callable[[Task, Any], None], *,
              lane: Lane = HEAVY, budget_s: float | None = None, if_busy: str = "latest",
              on_wait: Callable[[Task], None] | None = None, task: Task | None = None) -> Task | None:
        """Start ``work(task)`` on ``lane`` within ``budget_s`` seconds, then ``done(task, result)`` on the session;
        None when the task is not started: refused while one of ``key`` runs (``if_busy="refuse"``), kept for later
        (``"latest"``), or over :data:`MAX_TASKS`.  ``on_wait(task)`` is called on the session when the lane's
        threads are all taken and the task waits for one.  ``task``: the :class:`Task` to run as (made by the
        caller, who can then recognise its calls before this returns), else a new one."""
        with self.lock:
            if self.closed:
                return None
            if key in self.tasks:
                if if_busy == "latest":
                    self._next[key] = (work, done, lane, budget_s, on_wait)
                return None
            if len(self.tasks) >= MAX_TASKS:
                return None
            task = self.tasks[key] = task if task is not None else Task(key)
        if lane.submit(lambda: self._run(task, work, done, budget_s)) and on_wait is not None:
            self.call(task, on_wait, task)
        return task

    def _run(self, task: Task, work, done, budget_s) -> None:
        """On the lane's thread: the work, then its end handed to the session (always, cancelled or not)."""
        result: Any = None
        if task.cancelled.is_set():
            task.outcome = "cancelled"
        else:
            try:
                with deadline(budget_s):
                    result = work(task)
                task.outcome = "cancelled" if task.cancelled.is_set() else "complete"
            except Exception as e:  # noqa: BLE001 - handed to done, which tells the user
                result = e
                task.outcome = "cancelled" if task.cancelled.is_set() else "failed"
        self.call(task, self._end, task, done, result, always=True)

    def _end(self, task: Task, done, result) -> None:
        try:
            done(task, result)
        finally:
            with self.lock:
                if self.tasks.get(task.key) is task:
                    del self.tasks[task.key]
                queued = self._next.pop(task.key, None)
            task.finished.set()
        if queued is not None and not self.closed:
            work, done_, lane, budget_s, on_wait = queued
            self.start(task.key, work, done_, lane=lane, budget_s=budget_s, on_wait=on_wait)

    # ------------------------------------------------------------------------------------ talking to the page
    def call(self, task: Task, fn: Callable, *args, always: bool = False) -> None:
        """``fn(*args)`` on the session: on the document's next tick under its lock, as one message (served), or
        at once under :attr:`lock` (no server).  Nothing of a cancelled task is applied but its end (``always``)."""
        def apply():
            with self.lock:
                if always or not task.cancelled.is_set():
                    fn(*args)
        if not self.pump.served:
            apply()
            return
        doc = self.pump.doc

        def tick():
            with set_curdoc(doc), one_message(doc):
                apply()
        try:
            doc.add_next_tick_callback(tick)
        except Exception:  # noqa: BLE001 - the session is gone: nothing to show, stop computing for it
            task.cancel()
            if always:
                task.finished.set()

    def report(self, task: Task, fn: Callable, *args, final: bool = False) -> None:
        """:meth:`call`, at most every :data:`PROGRESS_S` (each call is a message the event loop writes); a
        ``final`` report always goes."""
        now = time.perf_counter()
        if final or now - task.reported_at >= PROGRESS_S:
            task.reported_at = now
            self.call(task, fn, *args)

    async def compute(self, fn: Callable, *args, lane: Lane = HEAVY, budget_s: float | None = None):
        """``fn(*args)`` on ``lane`` within ``budget_s`` for a caller that awaits its result (the PNG export), at
        once without a server; its exception is raised to the caller."""
        def bounded():
            with deadline(budget_s):
                return fn(*args)
        if not self.pump.served:
            return bounded()
        future = asyncio.get_running_loop().create_future()
        loop = asyncio.get_running_loop()

        def settle(value, error):
            if not future.done():
                future.set_exception(error) if error is not None else future.set_result(value)

        def run():
            try:
                loop.call_soon_threadsafe(settle, bounded(), None)
            except Exception as e:  # noqa: BLE001 - raised to the awaiting caller
                loop.call_soon_threadsafe(settle, None, e)
        lane.submit(run)
        return await future

    # -------------------------------------------------------------------------------------------- control
    def running(self, key: str) -> Task | None:
        return self.tasks.get(key)

    def cancel(self, key: str) -> Task | None:
        """Cancel the task of ``key`` (and forget a request waiting behind it); the task, or None if none runs."""
        with self.lock:
            self._next.pop(key, None)
            task = self.tasks.get(key)
            if task is None or task.cancelled.is_set():
                return None
            task.cancel()
            return task

    def wait(self, key: str, timeout: float | None = None) -> bool:
        """Wait for the task of ``key`` (and the requests queued behind it) to end; True when none runs."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            task = self.tasks.get(key)
            if task is None:
                return True
            left = None if end is None else max(0.0, end - time.monotonic())
            if not task.wait(left) and end is not None and time.monotonic() >= end:
                return False

    def close(self) -> None:
        """The browser session ended: cancel every task and drop the waiting requests."""
        with self.lock:
            self.closed = True
            self._next.clear()
            for task in self.tasks.values():
                task.cancel()
