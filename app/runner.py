"""The run / frame pump of a session: solver runs in worker threads, their records coalesced into frames.

How the solver runs without blocking the server
-----------------------------------------------
A run (:class:`_Run`) is the generator of its document's problem kind (``cfg.kind.iterate``).  When the session is
served, one *runner* task per session (an ``asyncio`` task on the Bokeh event loop, :meth:`FramePump.runner_loop`)
advances the current run one iteration at a time in a worker thread (see *Worker pools* below), so the event loop never
waits for the solver. Records are coalesced into *frames*: the first frame of a run goes out as soon as iteration 1
exists (that is what a click waits for), later frames at most every :data:`MIN_FRAME_S` seconds (about 10 per second per
session), and the final state always.  The first frame shows the heatmap alone; the traces, mixing bars, scrubber and
status line follow with the next frame and every one after it.  A run started by a user action on a small grid
(:data:`QUICK_NODES`) has that first frame computed on the event loop at the end of the action and sent in the
action's own message (:meth:`FramePump.answer_now`).  A frame is applied on the session's document
(``add_next_tick_callback``, so the views touch Bokeh models under the document lock) inside
:func:`app.transport.one_message`, so one frame is one websocket message.  Iterations are paced by the session's
``frame_ms`` so a run plays out visibly, and a browser that has not acknowledged the previous frame gets no new one
for up to :data:`ACK_TIMEOUT_S` (records are coalesced instead).

Any change that alters the problem (a click, a slider, a preset, an upload) replaces the current run by a new one
warm-started from the field on screen.  Only the runner advances a generator; when it comes back from the worker
thread with a record of a replaced run it drops the record, closes that generator and goes on with the newest run.
So a burst of clicks costs one iteration of stale work at most, and only the latest state is solved.

Without a server (tests, notebooks) the same methods step the generator synchronously.

What one session may cost the server (issue 11)
-----------------------------------------------
*Worker pools.*  ``asyncio.to_thread`` would put every session's iterations on the loop's default executor, shared
by all sessions: three 16 000-node solves filled it and a click on the paper grid queued behind them.  Runs above
:data:`HEAVY_NODES` grid nodes (a quarter of that for field P, whose sparse factorisations cost most) go through
one thread, ``_HEAVY_POOL``, in turn across sessions and with the background tasks of :mod:`app.work` (its heavy
lane: the evidence path, the beta sweep, the export); smaller runs have threads of their own,
``_LIGHT_POOLS``.  However many heavy links are open, they take one core between them and a small problem's click
is computed at once.  Every executor has one thread and a run keeps its executor from its first iteration to the
close of its generator: scipy's SuperLU frees a factorisation only on the thread that made it.

*Compute budget.*  The runner adds up the seconds each run spends inside the worker thread; past
:data:`RUN_COMPUTE_S` the run is stopped with a message and its last iteration stays on screen (the background
tasks of the heavy lane get the same budget as a wall-clock deadline).

*Memory.*  When the browser session ends, :meth:`FramePump.close` stops the run, and :func:`release_memory` gives
the freed pages back to the system; a fixed glibc mmap threshold (set at import) keeps large arrays out of the
worker threads' heaps, which glibc would otherwise keep.  The history a session keeps is its records without their
arrays.

The pump writes the session's outputs (``record``, ``history``, ``run_id``, ``status``, ``running``, ``converged``,
``result``, ``sweep``, ``sweeping``, ``message``) and reads its ``frame_ms``; it does not know how the session
builds a configuration (the session hands it one to :meth:`FramePump.start`).
"""
from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import param
from panel.io.state import set_curdoc

from bftcore.foundations.config import kind_of
from bftcore.foundations.limits import RunBudgetExceeded, blas_threads
from bftcore.models.local_priors import HyperpriorTooWeak

from .transport import at_release, one_message
from .work import HEAVY

log = logging.getLogger(__name__)
# `panel serve --log-level LEVEL` sets the level of Bokeh's logger only; the dashboard's lines follow the same choice
log.setLevel(logging.getLogger("bokeh").getEffectiveLevel())

#: Seconds of computing (time inside the worker thread, not pacing or queueing) one run may take on the server;
#: past it the run is stopped with a message and the last iteration stays on screen.  The problems the budget of
#: bftcore.foundations.limits accepts take 1-5 s alone on the project's machine, except field P by Newton at 128 x 128
#: with a weak prior (l2 = 0.025: 9-13 s an iteration, in SuperLU's factorisation), which this stops after 2 or 3.  A
#: single iteration is never interrupted: the budget is checked between iterations.
RUN_COMPUTE_S = 20.0
#: A run is *heavy* above this many grid nodes (field P: a quarter of it, for its sparse factorisations).
#: Heavy iterations of every session go through one worker thread, in turn; light ones have threads of their
#: own, so a click on the paper grid never waits behind 16 000-node solves of other sessions.
HEAVY_NODES = 4096
#: Worker threads of the light runs.  Each is an executor of one thread, and a run keeps its thread for its whole
#: life, the close of its generator included: scipy's SuperLU gives a factorisation's memory back only on the
#: thread that made it (scipy issue 15921), and a 128 x 128 massive-relaxation run closed from the event loop left
#: 150 MB behind for good.
LIGHT_THREADS = 4
_LIGHT_POOLS = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"bft-light-{k}") for k in range(LIGHT_THREADS)]
_LIGHT_TURN = itertools.cycle(_LIGHT_POOLS)
_HEAVY_POOL = HEAVY.executor  # the heavy lane of app.work: heavy runs and background tasks in turn
#: Shortest time between two frames pushed to the browser while a run plays (at most ~10 frames/s).
MIN_FRAME_S = 0.15
#: Shortest time between two updates of the secondary views (traces, mixing, regression curve, status line)
#: within a run.  0 (issue 13, "the lecture hall"): they move with every frame of the heatmap, in the same frame and
#: the same websocket message (:func:`app.transport.one_message`), so energy, errors and a_j stream at the frame
#: rate of the heatmap instead of jumping by a dozen iterations once a second.  The last frame of a run (and of a
#: step or a pause) always updates them; the first frame of a served run never does (it is what a click waits for:
#: the heatmap alone repaints), the second catches up.
SECONDARY_FRAME_S = 0.0
#: A run on at most this many grid nodes answers the action that started it (a click, a key, a slider, a preset)
#: in the same websocket message: its iterations 0 and 1 are computed on the event loop at the end of that action
#: (:meth:`FramePump.answer_now`, a few milliseconds on such grids: 1-3 ms on the paper's 10 x 15), instead of a
#: round trip through a worker thread and a second message.  The rest of the run goes through the worker threads
#: as usual.  Larger runs (and every run when no action's message is open) start on their worker thread.  Their
#: factorisations are small enough here that the thread rule of the worker pools (SuperLU's memory) does not
#: matter.
QUICK_NODES = 1024
#: Bytes of fields one session keeps of its current run for the history scrubber (:class:`FieldBuffer`).
FIELD_BUDGET_BYTES = 64 * 1024 * 1024
#: A browser that has not yet applied the previous frame gets no new one (records are coalesced instead), for at
#: most this long.  Frames then follow what each browser can draw: on a loaded machine a page receives fewer,
#: fuller frames instead of a queue of stale ones; the first frame of a run and the final one are never held.
ACK_TIMEOUT_S = 1.0
#: After a user action's answer (:meth:`FramePump.answer_now`) the runner waits this long before computing the next
#: iteration: its worker thread would otherwise compete for the GIL with the writing of that answer (up to
#: Python's 5 ms switch interval).  Shorter than a frame (:data:`MIN_FRAME_S`), so the animation does not notice.
ANSWER_GAP_S = 0.01


class _Done:
    """Marker for an exhausted generator."""


def _next_record(gen):
    try:
        return next(gen)
    except StopIteration:
        return _Done


def _timed_next(gen):
    """The next record of ``gen`` and the seconds it took (measured in the worker thread)."""
    t0 = time.perf_counter()
    rec = _next_record(gen)
    return rec, time.perf_counter() - t0


def _close_generator(gen, release: bool) -> None:
    """Close a run's generator on its worker thread (:meth:`_Run.close`), then give memory back if ``release``."""
    gen.close()
    if release:
        release_memory()


def _glibc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:  # not glibc (macOS, musl, Windows): nothing to tune
        return None


_LIBC = _glibc()
if _LIBC is not None:
    # glibc raises its mmap threshold after a large block is freed, up to 32 MB, so that later arrays of a few MB
    # land in the heaps of the worker threads, which are never given back to the system: a closed 128 x 128
    # session left its gigabyte behind.  A fixed threshold keeps every array above 128 KiB in its own mapping,
    # returned to the system when freed.
    _LIBC.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD


def release_memory() -> None:
    """Give the memory freed by closed sessions back to the system (glibc keeps freed heap pages otherwise)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


#: The line the server logs (at INFO, once per session) when an ended session's runs have been closed on their
#: worker threads and the memory given back: after it the session costs the server nothing.  An operator can read
#: it in the workers' logs; the memory test waits for it instead of a clock (``app.harness.hostile_scenario``).
SESSION_RELEASED = "session ended: its runs are closed and their memory given back"


def _report_released() -> None:
    release_memory()
    log.info(SESSION_RELEASED)


def iterate(cfg, init=None):
    """The records of a run of the validated document ``cfg``: its problem kind's, asked directly (the façade's
    ``bftcore.api.iterate`` does the same for a document from outside)."""
    blas_threads()
    return cfg.kind.iterate(cfg, init)


def trial_start(cfg: dict) -> None:
    """Build the problem of a validated document and its start field (iteration 0), then drop them: what the
    solver cannot even start is refused before a session takes it."""
    gen = iterate(cfg)
    try:
        next(gen)
    finally:
        gen.close()


def _nodes(cfg: dict) -> int:
    return kind_of(cfg).nodes(cfg)


def _is_heavy(cfg: dict) -> bool:
    kind = kind_of(cfg)
    return kind.nodes(cfg) > (HEAVY_NODES // 4 if kind.is_sparse_heavy(cfg) else HEAVY_NODES)


def _is_quick(cfg: dict) -> bool:
    """A run small enough for its first frame to be computed inside the action that started it (QUICK_NODES)."""
    return _nodes(cfg) <= QUICK_NODES


def grid_key(cfg: dict):
    """What a field's shape and meaning depend on: a warm start is only taken from a run with the same key."""
    g = cfg["grid"]
    return (cfg["model"], cfg["prior"].get("field"), tuple(sorted(g["x"].items())), tuple(sorted(g["y"].items())))


def _number(v) -> str:
    """A trace value for the status line: "—" for a missing or non-finite value."""
    return "—" if v is None or not np.isfinite(v) else f"{float(v):.4f}"


def status_line(rec) -> str:
    """The status line of a record.  The training error of no data is the mean over an empty sample (NaN): it is
    shown as "—" with the reason, not as "nan"; the test error appears only when the truth is known."""
    train = _number(rec.train_error)
    if train == "—":
        train += " (no data points)"
    return (f"iteration {rec.iteration}  ·  energy {_number(rec.energy)}  ·  training error {train}"
            + ("" if rec.test_error is None else f"  ·  test error {_number(rec.test_error)}"))


def failure_words(error: Exception, run=None) -> str:
    """What a user reads when the solver fails: what happened, in words, with no Python exception names.  The last
    good iteration stays on screen; the message goes away with the next action (see BFTSession)."""
    at = "" if run is None or run.last is None else f" after iteration {run.last.iteration}"
    if isinstance(error, HyperpriorTooWeak):  # its own words say where and what to raise
        return f"The solver stopped{at}: {error}. The last good iteration stays on screen."
    if isinstance(error, MemoryError):
        why = "the problem does not fit in the server's memory"
    elif isinstance(error, (np.linalg.LinAlgError, ZeroDivisionError)) or "singular" in str(error).lower():
        why = "a linear system of the step became singular"
    elif isinstance(error, (FloatingPointError, OverflowError)) or "finite" in str(error).lower() \
            or "nan" in str(error).lower():
        why = "the numbers left the finite range (the step diverged)"
    else:
        why = "the step could not be computed"
    return (f"The solver failed{at}: {why}. The last good iteration stays on screen; try another solver, a "
            f"stronger prior (larger lambda) or Reset.")


def without_arrays(rec):
    """A record as the history keeps it: its numbers, without the fields (L, P, h and the solver's own)."""
    return dataclasses.replace(rec, L=None, P=None, h=None, field=None)


def _exact(run):
    """What is exact about a finished run in closed form (regression: the predictive mean and variance; no second
    solve), or None for a kind without."""
    try:
        exact = kind_of(run.cfg).exact(run.cfg)
    except Exception as e:  # noqa: BLE001 - shown as a message, the MAP solution stays
        return e
    return None if exact is None else {"exact": exact}


class FieldBuffer:
    """The fields of the current run, per iteration, for the history scrubber (replaying iteration k).

    Decision (issue 13): the session's ``history`` keeps its Records *without* arrays (memory); the fields of the
    current run only are kept here, as float32 (half the bytes of the solver's float64; the colour scale of the
    heatmap does not resolve more), within a byte budget of :data:`FIELD_BUDGET_BYTES` (64 MB) per session.  What
    is kept is the field a user sees: P for a density, h for a regression.  Past the budget the buffer is
    *decimated*: every other stored iteration is dropped (iteration 0 and the latest are always kept) and from then
    on only every ``stride``-th iteration is stored, the stride doubling at each decimation.  A scrub to an
    iteration that was dropped shows the nearest stored one before it.  The 10x15 paper grid takes 600 bytes per
    iteration, so a whole run is kept; a 128x128 run keeps about 1000 iterations before decimation.  A new run
    empties the buffer; the session's close drops it."""

    def __init__(self, budget: int = FIELD_BUDGET_BYTES):
        self.budget = budget
        self.fields: dict[int, np.ndarray] = {}
        self.stride = 1
        self.nbytes = 0

    def clear(self):
        self.fields, self.stride, self.nbytes = {}, 1, 0

    def add(self, rec) -> None:
        arr = rec.h if rec.P is None else rec.P
        if arr is None:
            return
        k = int(rec.iteration)
        if k % self.stride and k != 0:
            # keep the latest always: it replaces the previous off-stride latest
            last = max(self.fields) if self.fields else None
            if last is not None and last % self.stride and last != 0:
                self.nbytes -= self.fields.pop(last).nbytes
        a = np.asarray(arr, dtype=np.float32).copy()
        self.fields[k] = a
        self.nbytes += a.nbytes
        while self.nbytes > self.budget and len(self.fields) > 2:
            self.stride *= 2
            latest = max(self.fields)
            for j in sorted(self.fields):
                if j != 0 and j != latest and j % self.stride:
                    self.nbytes -= self.fields.pop(j).nbytes

    def at(self, k: int):
        """(iteration, field) of the stored iteration nearest to ``k`` at or before it, or (None, None)."""
        kept = [j for j in self.fields if j <= k]
        if not kept:
            return None, None
        j = max(kept)
        return j, self.fields[j]


class _Run:
    """One solve: the generator, the configuration it solves, and how far the browser has seen it."""

    __slots__ = ("gen", "cfg", "key", "warm", "start", "last", "fresh", "pushed", "pushed_at", "frames", "done",
                 "unshown", "shown_at", "compute_s", "pool", "answered")

    def __init__(self, gen, cfg, key, warm):
        self.gen, self.cfg, self.key, self.warm = gen, cfg, key, warm
        self.start = None    # the record of iteration 0 (the start field), kept for the export of a warm start
        self.last = None     # the latest record computed
        self.fresh = True    # no frame of this run applied yet: the first one replaces the traces
        self.pushed = False  # a frame of this run has been sent (by the runner or by FramePump.answer_now)
        self.pushed_at = 0.0  # when (time.perf_counter)
        self.frames = 0      # frames of this run applied on the session
        self.done = False
        self.unshown = []    # history records (without arrays) not yet given to the secondary views
        self.shown_at = time.perf_counter()  # when the secondary views were last updated (or the run began)
        self.compute_s = 0.0  # seconds spent computing this run's records (the server's RUN_COMPUTE_S)
        self.pool = _HEAVY_POOL if _is_heavy(cfg) else next(_LIGHT_TURN)  # the one thread of this run
        self.answered = False  # its first frame went out with a user action (FramePump.answer_now)

    def close(self, on_worker: bool, release: bool = False) -> None:
        """Close the generator; ``on_worker`` (served): on this run's own thread, after the iteration it may be
        computing.  ``release`` then gives the freed memory back to the system (the session has ended)."""
        if on_worker:
            self.pool.submit(_close_generator, self.gen, release)
        else:
            self.gen.close()


class FramePump:
    """Plays the runs of one session and shows their records on it, frame by frame (see the module's text)."""

    def __init__(self, session, doc=None):
        self.session = session   # the BFTSession whose outputs the frames set
        self.doc = doc           # Bokeh document when served; None runs everything synchronously
        self.run = None          # the current run (_Run) or None
        self.shown_key = None    # grid_key of the run whose field is in session.record
        self.shown_run = None    # the run whose record is on screen (its start field is the export's init)
        self.playing = False     # the runner keeps going while True
        self.steps = 0           # single steps requested while paused
        self.task = None         # the session's runner task (served only)
        self.frame_serial = 0    # frames with records applied (the canvas sends it to the browser with the image)
        self.frame_acked = None  # the last serial the browser reported as applied; None: it never reported
        self.closed = False      # the browser session ended (close)
        self._served = False     # see served
        self._served = self.served
        self.fields = FieldBuffer()  # the fields of the run on screen, for the history scrubber
        self._close_pools: set = set()  # worker pools on which this session's runs were closed (report_released)

    @property
    def served(self) -> bool:
        """The session is served by a Bokeh server (its runs go through worker threads), and stays so once seen:
        Bokeh clears the document's ``session_context`` before it calls the session-destroyed hooks, and a close
        that then took the session for an unserved one closed a generator on the event loop while its worker
        thread was inside it ("generator already executing": the hook failed and the session's memory stayed)."""
        if not self._served:
            self._served = self.doc is not None and getattr(self.doc, "session_context", None) is not None
        return self._served

    # --- run control ------------------------------------------------------------------------------------------
    def start(self, cfg: dict, init=None) -> bool:
        """Replace the current run by a run of the validated ``cfg`` from the field ``init`` (None: the
        configured initialisation); False (and a message) if the solver cannot start it."""
        self.drop()
        try:
            gen = iterate(cfg, init=init)
        except ValueError as e:
            self.cancel()
            self.session.message = f"Cannot solve: {e}"
            return False
        self.run = _Run(gen, cfg, grid_key(cfg), warm=init is not None)
        return True

    def warm_start(self):
        """The iteration-0 record of the run on screen when it was warm-started (else None)."""
        run = self.shown_run
        return run.start if run is not None and run.warm else None

    def cancel(self):
        """Stop the current run (its generator is closed on its worker thread when served)."""
        self.drop()
        if self.session.running:
            self.session.running = False

    def drop(self):
        run, self.run = self.run, None
        self.playing, self.steps = False, 0
        if run is not None:
            run.close(on_worker=self.served, release=self.closed)
            if self.served:
                self._close_pools.add(run.pool)

    def close(self):
        """The browser session ended: stop the run and forget the runs (their generators are closed on their
        worker threads, after an iteration they may still be computing, and the memory released there)."""
        self.closed = True
        self.cancel()
        self.run = self.shown_run = None
        self.fields.clear()

    def report_released(self) -> None:
        """After :meth:`close` and the session's own arrays are dropped: give the memory back and log
        :data:`SESSION_RELEASED` once every run of the session has been closed on its worker thread (each pool has
        one thread and serves in order, so a task queued behind the closes runs after them); at once when no run
        was closed on a worker."""
        pools, self._close_pools = list(self._close_pools), set()
        if not pools:
            _report_released()
            return
        remaining, lock = [len(pools)], threading.Lock()

        def one_pool_done():
            with lock:
                remaining[0] -= 1
                last = remaining[0] == 0
            if last:
                _report_released()
        for pool in pools:
            pool.submit(one_pool_done)

    def play(self):
        """Run (or resume) the current run, animated."""
        self.playing = True
        if not self.session.running:
            self.session.running = True
        if self.served:
            self.ensure_runner()
            at_release(self.doc, self.answer_now)  # inside a user action: its first frame goes out with it
        else:
            while self.playing and self.advance_sync():
                pass

    def pause(self):
        """Stop after the current iteration; the run is kept and play resumes it."""
        self.playing = False
        self.steps = 0
        self.session.running = False

    def step(self):
        """Advance the current run by one iteration."""
        self.playing = False
        if self.session.running:
            self.session.running = False
        if self.served:
            self.steps += 1
            self.ensure_runner()
        else:
            self.advance_sync()

    def answer_now(self):
        """The first frame of a new, quick run (:data:`QUICK_NODES`), computed on the event loop at the end of the
        user action that started it and applied inside that action's message (:func:`app.transport.at_release`):
        the point clicked and the heatmap that answers it reach the browser together.  The runner task goes on
        from iteration 2, paced from this frame.  Nothing happens for a run already shown, a heavier run, or a
        run replaced meanwhile."""
        run = self.run
        if run is None or run.pushed or run.done or not self.playing or not _is_quick(run.cfg):
            return
        if self._first_frame(run):
            run.answered = True

    def first_frame(self) -> bool:
        """The first frame of the current run, computed now and not played: a page being built shows its first
        heatmap in the document the browser loads, instead of after the page has been drawn, has told the server
        it is ready and has waited for a frame of the runner (issue 28: 1-1.5 s of a new tab).  :meth:`play`
        then goes on from iteration 2.  Quick runs only (:data:`QUICK_NODES`); False when nothing was shown."""
        run = self.run
        if run is None or run.pushed or run.done or not _is_quick(run.cfg):
            return False
        return self._first_frame(run)

    def _first_frame(self, run) -> bool:
        """Compute iterations 0 and 1 of ``run`` on this thread and apply them as its first frame."""
        recs: list = []
        try:
            while not recs or recs[-1].iteration < 1:
                rec, spent = _timed_next(run.gen)
                run.compute_s += spent
                if rec is _Done:
                    break  # the runner meets the end of the generator again and finishes the run
                run.last = rec
                recs.append(rec)
        except Exception as e:  # noqa: BLE001 - any solver failure keeps the last good solution
            run.done = True
            self.apply_frame(run, recs)
            self.apply_frame(run, [], error=e)
            return False
        if not recs:
            return False
        self.apply_frame(run, recs)
        run.pushed, run.pushed_at = True, time.perf_counter()
        return True

    # --- records -> what the views watch ----------------------------------------------------------------------
    def apply_frame(self, run, recs, finished=False, exact=None, error=None, flush=False):
        """Show the records of one frame (and the end of the run); records of a replaced run are dropped.
        ``flush`` updates the secondary views too (a single step, or the runner stopping on a pause)."""
        if run is not self.run:
            return
        s = self.session
        if error is not None:
            self.run = None
            self.playing = False
            with param.parameterized.batch_call_watchers(s):
                s.running = False
                s.message = str(error) if isinstance(error, RunBudgetExceeded) else failure_words(error, run)
            return
        if run.fresh and recs:
            self.fields.clear()
        for rec in recs:
            if rec.iteration == 0:
                run.start = rec
            self.fields.add(rec)
        run.unshown += [without_arrays(r) for r in recs]
        now = time.perf_counter()
        # served, the first frame of a run is the hero alone (what a click waits for); the traces, the mixing
        # bars, the scrubber and the status line follow with the next frame, and with every frame after it
        secondary = run.unshown and (finished or flush or not self.served
                                     or run.frames > 0 and now - run.shown_at >= SECONDARY_FRAME_S)
        with param.parameterized.batch_call_watchers(s):
            if recs:
                run.frames += 1
                self.shown_key, self.shown_run = run.key, run
                self.frame_serial += 1
                s.record = recs[-1]
            if secondary:
                entries, run.unshown, run.shown_at = run.unshown, [], now
                if run.fresh:
                    run.fresh = False
                    s.history = entries
                    s.run_id += 1
                    if s.result is not None:
                        s.result = None
                else:
                    s.history = s.history + entries
                s.status = status_line(entries[-1])
            if finished:
                self.run = None
                self.playing = False
                s.running = False
                s.converged = True
                last = run.last
                if last is not None:
                    s.status = (s.status.split("  ·  finished")[0] + "  ·  finished"
                                + ("" if getattr(last, "converged", True) else " (max iterations)"))
                if isinstance(exact, Exception):
                    s.message = f"Exact regression quantities unavailable: {exact}"
                elif exact is not None:
                    s.result = exact

    def show_iteration(self, k: int) -> bool:
        """The history scrubber: put iteration ``k`` of the run on screen (its record from the history with its
        field from :attr:`fields`: the heatmap, the mixing bars and the traces' cursor follow ``session.record``).
        Only while no run plays (after a run, or paused); False when iteration ``k`` is not available."""
        s = self.session
        if s.running or not s.history:
            return False
        entries = [r for r in s.history if int(r.iteration) <= k]
        if not entries:
            return False
        j, arr = self.fields.at(int(entries[-1].iteration))
        if arr is None:
            return False
        entry = next(r for r in s.history if int(r.iteration) == j)
        field = np.asarray(arr, dtype=float)
        if not s.kind.y_on_grid:
            rec = dataclasses.replace(entry, h=field, field=field)
        else:  # the P kept; L = ln P is the warm start of a change made while scrubbed
            with np.errstate(divide="ignore"):
                L = np.log(np.maximum(field, 1e-300))
            rec = dataclasses.replace(entry, P=field, L=L, field=L if s.model.endswith("L") else field)
        self.frame_serial += 1
        s.record = rec
        return True

    # --- synchronous path (tests, notebooks) ------------------------------------------------------------------
    def advance_sync(self) -> bool:
        run = self.run
        if run is None:
            return False
        try:
            rec = _next_record(run.gen)
        except Exception as e:  # noqa: BLE001 - any solver failure keeps the last good solution
            self.apply_frame(run, [], error=e)
            return False
        if rec is not _Done:
            run.last = rec
        if rec is _Done:
            self.apply_frame(run, [], finished=True, exact=_exact(run))
            return False
        self.apply_frame(run, [rec])
        return True

    def solve(self, max_records: int = 10_000):
        """Run the current run to the end synchronously (tests and scripts)."""
        n = 0
        while self.run is not None and n < max_records and self.advance_sync():
            n += 1

    # --- served path ------------------------------------------------------------------------------------------
    def push(self, fn, *args):
        """Run fn(*args) on the session's document with its lock held, all model changes in one message."""
        def apply():
            with set_curdoc(self.doc), one_message(self.doc):
                fn(*args)
        try:
            self.doc.add_next_tick_callback(apply)
        except Exception:  # noqa: BLE001 - the session is gone
            self.cancel()

    def ack_frame(self, serial: int):
        """The browser reports that it applied frame ``serial`` (see :data:`ACK_TIMEOUT_S`)."""
        self.frame_acked = serial

    def _browser_behind(self, since_push: float) -> bool:
        return self.frame_acked is not None and self.frame_acked < self.frame_serial and since_push < ACK_TIMEOUT_S

    def ensure_runner(self):
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self.runner_loop())

    async def runner_loop(self):
        """Advance the newest run one iteration at a time in a worker thread and push coalesced frames."""
        pending, pending_run = [], None
        while True:
            run = self.run
            if pending and pending_run is not run:  # the run was replaced: its unshown records are stale
                pending, pending_run = [], None
            if run is None or run.done or (not self.playing and self.steps <= 0):
                if run is not None and not run.done:  # paused: show everything computed so far
                    self.push(self.apply_frame, run, pending, False, None, None, True)
                return
            if run.answered:  # the action's message is still being written: a worker thread computing now would
                run.answered = False  # take the GIL from the writer (iteration 2 is due a frame later anyway)
                await asyncio.sleep(ANSWER_GAP_S)
                continue
            stepping = not self.playing
            if stepping:
                self.steps -= 1
            t0 = time.perf_counter()
            try:
                rec, spent = await asyncio.get_running_loop().run_in_executor(run.pool, _timed_next, run.gen)
                run.compute_s += spent
            except Exception as e:  # noqa: BLE001
                rec = e
            if run is not self.run:  # replaced while computing (and closed after it by drop): drop the record
                continue
            if rec is not _Done and not isinstance(rec, Exception) and run.compute_s > RUN_COMPUTE_S:
                run.last = rec
                pending.append(rec)
                pending_run = run
                run.close(on_worker=True)
                rec = RunBudgetExceeded(
                    f"Stopped this run after {run.compute_s:.0f} s of computing (the server's limit per run is "
                    f"{RUN_COMPUTE_S:g} s); showing its last iteration. Use a coarser grid, fewer iterations or a "
                    f"simpler prior.")
            if isinstance(rec, Exception):
                run.done = True
                if isinstance(rec, RunBudgetExceeded):  # show what the run reached, then say why it stopped
                    self.push(self.apply_frame, run, pending, False, None, None, True)
                self.push(self.apply_frame, run, [], False, None, rec)
                return
            if rec is _Done:
                run.done = True
                exact = (await asyncio.get_running_loop().run_in_executor(run.pool, _exact, run)
                         if kind_of(run.cfg).has_exact else None)  # no trip to the worker for a kind without
                if run is not self.run:
                    continue
                self.push(self.apply_frame, run, pending if pending_run is run else [], True, exact)
                return
            run.last = rec
            pending.append(rec)
            pending_run = run
            now = time.perf_counter()
            # the first frame of a run goes out with iteration 1 (the start field alone is what is on screen
            # already after a warm start); later ones at most every MIN_FRAME_S
            since = now - run.pushed_at
            due = not run.pushed or (since >= MIN_FRAME_S and not self._browser_behind(since))
            if stepping or (rec.iteration >= 1 and due):
                self.push(self.apply_frame, run, pending, False, None, None, stepping)
                pending, run.pushed_at, run.pushed = [], now, True
            if self.playing and rec.iteration >= 1:
                await asyncio.sleep(max(0.0, self.session.frame_ms / 1000 - (time.perf_counter() - t0)))
            else:
                await asyncio.sleep(0)

