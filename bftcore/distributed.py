"""Many independent fits, run where the user says: in this process, on a local Dask cluster, or on a running Dask
scheduler (``dask.distributed``).

Learning curves, bootstraps, beta sweeps from several starts and evidence grids are lists of independent tasks.
:func:`run_tasks` runs a list of them through one of these engines (the ``scheduler`` argument, the CLI's
``--scheduler``):

* ``None`` or ``"inprocess"`` (the default): a Dask client in this process, one worker thread.  It starts in about
  0.3 s and adds about 1 ms a task; the fits run one at a time beside the caller, which stays free to draw progress
  or to cancel.
* ``"serial"``: a plain loop in the caller's thread, no Dask at all: the reference the others are tested against.
* ``"local"`` or ``"local:N"``: a Dask ``LocalCluster`` of N worker processes (default: the machine's cores), one
  thread each, started for the call and closed after it.
* ``"tcp://host:8786"`` (any Dask address): a running scheduler, whose workers must have bftcore installed
  (``pip install bftcore`` and ``dask-worker tcp://host:8786`` on each machine).  Adding workers there needs no
  change here.

The result is the same whichever engine runs it: each task carries its own random seed (drawn from the call's seed
by :class:`numpy.random.SeedSequence`, never from a shared generator), and the results come back in task order.
Every worker limits its BLAS to :data:`bftcore.limits.BLAS_THREADS` threads and works under the caller's cost
budget (:func:`bftcore.limits.using`).

``progress(done, total)`` is called in the caller's thread as tasks complete; ``cancel()`` (returning True) is
polled a few times a second: the outstanding tasks are then cancelled and :class:`Cancelled` is raised.
"""
from __future__ import annotations

import os
import queue
from typing import Any, Callable, Sequence

from .limits import Limits, active, blas_threads, check_deadline, using

#: Most workers a ``local:N`` cluster may start (a typo such as local:2000 is refused, not obeyed).
MAX_LOCAL_WORKERS = 64
#: Seconds between two looks at ``cancel()`` while tasks run.
POLL_SECONDS = 0.1
#: Seconds to wait for a scheduler given by address before giving up with a clear message.
CONNECT_SECONDS = 10.0


class Cancelled(RuntimeError):
    """The caller cancelled the run (``cancel()`` returned True); the tasks not yet finished were dropped."""


def parse_scheduler(spec: str | None) -> tuple[str, Any]:
    """``(kind, arg)`` of a ``--scheduler`` value: ("inprocess", None), ("serial", None), ("local", workers) or
    ("address", address); a ValueError saying what is accepted otherwise."""
    if spec is None or spec == "inprocess":
        return "inprocess", None
    if not isinstance(spec, str):
        raise ValueError(f"the scheduler must be a string, got {type(spec).__name__}")
    if spec == "serial":
        return "serial", None
    if spec == "local" or spec.startswith("local:"):
        text = spec[len("local:"):] if ":" in spec else ""
        if not text:
            return "local", max(1, os.cpu_count() or 1)
        if not text.isdigit() or not 1 <= int(text) <= MAX_LOCAL_WORKERS:
            raise ValueError(f"local:N needs a number of workers N from 1 to {MAX_LOCAL_WORKERS}, got {spec!r}")
        return "local", int(text)
    if "://" in spec and spec.split("://", 1)[1]:
        return "address", spec
    raise ValueError(f"unknown scheduler {spec!r}; use inprocess (the default), serial, local, local:N (N worker "
                     f"processes) or the address of a running Dask scheduler such as tcp://host:8786")


def _run_one(fn: Callable, task: Any, limits: Limits) -> Any:
    """One task on a worker: the project's BLAS threads and the caller's cost budget."""
    blas_threads()
    with using(limits):
        return fn(task)


def _run_chunk(fn: Callable, chunk: list, limits: Limits) -> list:
    """Several tasks in one Dask task: a Dask task costs a few ms of scheduling (measured in process: 12.5 ms a
    task against 4.2 ms for the same fit called directly), as much as a fit on the paper mesh."""
    return [_run_one(fn, task, limits) for task in chunk]


#: Dask tasks per worker thread: the tasks are grouped into about this many chunks per thread (at least
#: MIN_CHUNKS), few enough to hide Dask's cost a task, enough to balance the load and to move the progress bar.
CHUNKS_PER_THREAD = 4
MIN_CHUNKS = 48


def run_tasks(fn: Callable[[Any], Any], tasks: Sequence, scheduler: str | None = None,
              progress: Callable[[int, int], None] | None = None,
              cancel: Callable[[], bool] | None = None,
              on_result: Callable[[int, Any], None] | None = None) -> list:
    """``[fn(t) for t in tasks]``, run by the engine ``scheduler`` names (module docstring), in task order.

    ``fn`` must be a module-level function (it is sent to the workers by reference) and each task a picklable
    value.  ``on_result(index, result)`` is called in the caller's thread for each task as it completes (before
    ``progress``).  An exception in a task is raised here, the other tasks cancelled.  The caller's deadline
    (:func:`bftcore.limits.deadline`) is checked as tasks complete."""
    kind, arg = parse_scheduler(scheduler)
    tasks = list(tasks)
    limits = active()
    if kind == "serial":
        out = []
        for k, task in enumerate(tasks):
            if cancel is not None and cancel():
                raise Cancelled(f"cancelled after {k} of {len(tasks)} tasks")
            check_deadline()
            out.append(_run_one(fn, task, limits))
            if on_result is not None:
                on_result(k, out[-1])
            if progress is not None:
                progress(k + 1, len(tasks))
        return out
    with _client(kind, arg) as client:
        return _gather(client, fn, tasks, limits, progress, cancel, on_result)


class _client:
    """A Dask client for the engine (and the cluster it starts), closed on exit."""

    def __init__(self, kind: str, arg: Any):
        self.kind, self.arg, self.cluster, self.client = kind, arg, None, None

    def __enter__(self):
        import dask
        from dask.distributed import Client, LocalCluster
        # Dask's scheduler and workers always start an HTTP server (its dashboard and routes), on 0.0.0.0:8787 when
        # no address is given: a port opened on every network each time a user asks for a learning curve.  Ours
        # listen on the loopback only, on a free port, and serve no routes.
        quiet = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
        loopback = {"dashboard_address": "127.0.0.1:0", "worker_dashboard_address": "127.0.0.1:0"}
        with dask.config.set(quiet):
            if self.kind == "inprocess":
                self.client = Client(processes=False, n_workers=1, threads_per_worker=1, **loopback)
            elif self.kind == "local":
                self.cluster = LocalCluster(n_workers=int(self.arg), threads_per_worker=1, processes=True,
                                            host="127.0.0.1", **loopback)
                self.client = Client(self.cluster)
        if self.kind == "address":
            try:
                self.client = Client(self.arg, timeout=CONNECT_SECONDS)
            except (OSError, TimeoutError) as e:
                raise ValueError(f"cannot reach the Dask scheduler at {self.arg} ({e}); start one with "
                                 f"'dask-scheduler' and workers with 'dask-worker {self.arg}', or drop "
                                 f"--scheduler to run here") from None
        return self.client

    def __exit__(self, *exc):
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        return False


def _gather(client, fn, tasks, limits, progress, cancel, on_result) -> list:
    """Submit the tasks in chunks, then collect them as they finish (a queue filled by the futures' callbacks, read
    with a timeout so that ``cancel`` is polled while nothing finishes)."""
    threads = max(1, sum(client.nthreads().values()))
    n_chunks = max(1, min(len(tasks), max(MIN_CHUNKS, CHUNKS_PER_THREAD * threads)))
    bounds = [round(k * len(tasks) / n_chunks) for k in range(n_chunks + 1)]
    chunks = [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    finished: queue.Queue = queue.Queue()
    futures = [client.submit(_run_chunk, fn, [tasks[i] for i in idx], limits, pure=False) for idx in chunks]
    for k, f in enumerate(futures):
        f.add_done_callback(lambda _f, k=k: finished.put(k))
    out: list = [None] * len(tasks)
    pending, done = set(range(len(chunks))), 0
    try:
        while pending:
            try:
                j: int | None = finished.get(timeout=POLL_SECONDS)
            except queue.Empty:
                j = None
            if j is not None and j in pending:
                for i, res in zip(chunks[j], futures[j].result()):  # raises the task's own exception
                    out[i] = res
                    if on_result is not None:
                        on_result(i, res)
                pending.discard(j)
                done += len(chunks[j])
                if progress is not None:
                    progress(done, len(tasks))
            if cancel is not None and cancel():
                raise Cancelled(f"cancelled after {done} of {len(tasks)} tasks")
            check_deadline()
    except BaseException:
        client.cancel([futures[j] for j in pending])
        raise
    return out
