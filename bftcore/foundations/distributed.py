"""Many independent fits, run where the user says: in this process, on a local Dask cluster, or on a running Dask
scheduler (``dask.distributed``).

Learning curves, bootstraps, beta sweeps from several starts and evidence grids are lists of independent tasks.
:func:`run_tasks` runs a list of them through one of these engines (the ``scheduler`` argument, the CLI's
``--scheduler``):

* ``None`` or ``"serial"`` (the default): a plain loop in the caller's thread, no Dask at all: the reference the
  others are tested against.  ``progress`` and ``cancel`` work between tasks as on every engine.
* ``"inprocess"``: a Dask client in this process, one worker thread.  It starts in about 0.3 s and adds a few ms a
  task; the fits run one at a time beside the caller, which stays free to draw progress or to cancel.
* ``"local"`` or ``"local:N"``: a Dask ``LocalCluster`` of N worker processes (default: the machine's cores), one
  thread and one BLAS thread each, started for the call and closed after it (two spawned workers start in about
  3 s on this 2-core machine).  :func:`running_cluster` keeps one up for many calls, reached by its address.

Why the default is the plain loop (issue 31, measured on the README's learning curve, fig21's preset, 800 fits,
2-core machine): the in-process client runs the same fits on one thread as the loop does, plus its start-up and
its scheduling, so it can only be slower (3.56 s serial against 5.22 s; 3.79 s against 4.31 s in a second run), and
a LocalCluster's start-up (3.2 s for two spawned workers) is a good part of the whole curve.  Decision: the workers
are spawned (Dask's default), not forked: forking a process whose event-loop thread runs beside the caller's is
what Dask's default avoids; forked workers started in 1.1 s, but a curve that needs speed runs on a cluster that
is kept up (:func:`running_cluster`, or ``dask scheduler`` and ``dask worker``), where start-up is paid once.
Parallel engines are asked for by name; docs/performance.md has the tables.
* ``"tcp://host:8786"`` or ``"tls://host:8786"``: a running scheduler, whose workers must have bftcore installed
  (``pip install bftcore`` and ``dask worker tcp://host:8786`` on each machine).  Adding workers there needs no
  change here.  A ``tls://`` scheduler needs the cluster's certificates (:func:`using_tls`, the CLI's
  ``--tls-ca-file``, ``--tls-cert``, ``--tls-key``, or Dask's own ``distributed.comm.tls.*`` configuration).

A scheduler given by address is trusted: Dask's protocol carries pickles, so the scheduler (and whoever can reach
it) runs code in this process, and this process sends code to it.  What this module guards against is a wrong or
broken address: connecting, Dask's handshake and the scheduler's first reply share one deadline
(:data:`CONNECT_SECONDS`), and every failure there is a :class:`SchedulerError` that names the address.  No Dask
setting bounds the length of an incoming frame: a peer that announces a length numpy cannot allocate (an HTTP
or SSH server's first bytes read as one) is refused as the scheduler's fault; a plausible length reserves address
space only (numpy's ``empty``; measured: 58 MB resident with a 2 GiB frame announced) until the deadline ends the
wait for bytes that never come.  Against a hostile peer the defence is not to reach it: loopback, a trusted
network, or TLS with a certificate authority made for the cluster.

The result is the same whichever engine runs it: each task carries its own random seed (drawn from the call's seed
by :class:`numpy.random.SeedSequence`, never from a shared generator), and the results come back in task order.
Every worker limits its BLAS to :data:`bftcore.foundations.limits.BLAS_THREADS` threads and works under the caller's
cost budget (:func:`bftcore.foundations.limits.using`).

``progress(done, total)`` is called in the caller's thread as tasks complete; ``cancel()`` (returning True) is
polled a few times a second: the outstanding tasks are then cancelled and :class:`Cancelled` is raised.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import queue
import time
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import urlsplit

from .limits import Limits, active, blas_threads, check_deadline, using

#: Most workers a ``local:N`` cluster may start (a typo such as local:2000 is refused, not obeyed).
MAX_LOCAL_WORKERS = 64
#: Seconds between two looks at ``cancel()`` while tasks run.
POLL_SECONDS = 0.1
#: Seconds for a scheduler given by address to accept the connection, finish Dask's handshake and answer the
#: first request (the count of its worker threads): one deadline for the three.
CONNECT_SECONDS = 10.0
#: Seconds given to closing a client whose scheduler failed, on top of CONNECT_SECONDS.
CLOSE_SECONDS = 2.0
#: The schemes of a scheduler's address: Dask's TCP, and TCP under TLS.
SCHEMES = ("tcp", "tls")
#: Dask's background work, slowed down on the engines bftcore starts (``inprocess``, ``local:N``,
#: :func:`running_cluster`; a scheduler given by address keeps its own configuration).  Decision (issue 31): on two
#: cores the calling process (a LocalCluster's scheduler and nannies live there) and the workers share the cores
#: with the fits.  Idle, Dask's defaults took 14 % of one core in all (the event loop's tick every 20 ms, the
#: workers' statistical profiler every 10 ms, the nannies' memory monitors every 100 ms, the system monitor every
#: 500 ms); with these, 2 %.  Over the README's learning curve on a running two-worker cluster the calling process
#: spent 0.10 s of CPU a curve against 0.18 s (medians of 24 curves each), 0.08 s with the chunks pickled as well
#: (:func:`_run_chunk`).  The wall time did not move beyond this machine's noise.  What is given up: Dask's profile
#: pages (bftcore serves none of Dask's pages), and a worker over its memory limit is stopped within 1 s instead of
#: 0.1 s (bftcore's own cost budget refuses large fits before they start).  docs/performance.md has the figures.
QUIET = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
         "distributed.admin.system-monitor.interval": "5s", "distributed.worker.memory.monitor-interval": "1s"}


def quiet_environment() -> str:
    """:data:`QUIET` as Dask's environment variables (``DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL=1s ...``), one
    line: what deploy/dask-cluster.sh gives the scheduler and workers it starts (``python -m
    bftcore.foundations.distributed`` prints it)."""
    return " ".join("DASK_" + key.upper().replace(".", "__").replace("-", "_") + "=" + str(value)
                    for key, value in QUIET.items())


class Cancelled(RuntimeError):
    """The caller cancelled the run (``cancel()`` returned True); the tasks not yet finished were dropped."""


class SchedulerError(ValueError):
    """A scheduler given by address could not be reached, did not speak Dask, or failed: the message names the
    address, what went wrong and what to do."""

    def __init__(self, address: str, what: str):
        super().__init__(f"the Dask scheduler at {address} {what}")
        self.address = address


def parse_scheduler(spec: str | None) -> tuple[str, Any]:
    """``(kind, arg)`` of a ``--scheduler`` value: ("serial", None) (also for None, the default), ("inprocess",
    None), ("local", workers) or ("address", address); a ValueError saying what is accepted otherwise."""
    if spec is None or spec == "serial":
        return "serial", None
    if not isinstance(spec, str):
        raise ValueError(f"the scheduler must be a string, got {type(spec).__name__}")
    if spec == "inprocess":
        return "inprocess", None
    if spec == "local" or spec.startswith("local:"):
        text = spec[len("local:"):] if ":" in spec else ""
        if not text:
            return "local", max(1, os.cpu_count() or 1)
        if not text.isdigit() or not 1 <= int(text) <= MAX_LOCAL_WORKERS:
            raise ValueError(f"local:N needs a number of workers N from 1 to {MAX_LOCAL_WORKERS}, got {spec!r}")
        return "local", int(text)
    if "://" in spec:
        return "address", _check_address(spec)
    raise ValueError(f"unknown scheduler {spec!r}; use serial (the default), inprocess, local, local:N (N worker "
                     f"processes) or the address of a running Dask scheduler such as tcp://host:8786")


def _check_address(address: str) -> str:
    """``address`` if it is ``tcp://HOST[:PORT]`` or ``tls://HOST[:PORT]``; a SchedulerError otherwise."""
    scheme = address.split("://", 1)[0]
    if scheme not in SCHEMES:
        raise SchedulerError(address, f"has the scheme {scheme}://, which bftcore does not reach; use "
                                      f"tcp://HOST:PORT, or tls://HOST:PORT with the cluster's certificates")
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError:
        raise SchedulerError(address, "has no valid port; give a number from 1 to 65535, as in "
                                      f"{scheme}://HOST:8786") from None
    if not parts.hostname:
        raise SchedulerError(address, f"names no host; give one, as in {scheme}://127.0.0.1:8786")
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        raise SchedulerError(address, f"is not of the form {scheme}://HOST:PORT; drop what follows the port")
    if port == 0:
        raise SchedulerError(address, "has port 0; give the scheduler's port, 8786 unless it was told otherwise")
    return address


@contextlib.contextmanager
def using_tls(ca_file: str, cert: str, key: str) -> Iterator[None]:
    """Within the block, ``tls://`` schedulers are reached with these certificates: the cluster's certificate
    authority, this client's certificate and its private key (files, or their PEM text, as
    :meth:`distributed.security.Security.temporary` holds them).  They become Dask's own configuration
    ``distributed.comm.tls.*`` for the block, which :class:`distributed.security.Security` reads."""
    files = {"ca-file": ("certificate authority", ca_file), "client.cert": ("certificate", cert),
             "client.key": ("key", key)}
    for what, value in files.values():
        if not isinstance(value, str) or not value:
            raise ValueError(f"the TLS {what} is missing; give the cluster's certificate authority, certificate "
                             f"and key (deploy/dask-cluster.sh --tls prints them)")
        if "\n" not in value and not (os.path.isfile(value) and os.access(value, os.R_OK)):
            raise ValueError(f"the TLS {what} {value} is not a readable file")
    import dask
    with dask.config.set({f"distributed.comm.tls.{name}": value for name, (_, value) in files.items()}):
        yield


@contextlib.contextmanager
def running_cluster(workers: int = 2) -> Iterator[str]:
    """A Dask ``LocalCluster`` of ``workers`` worker processes (one thread each, one BLAS thread, listening on the
    loopback only) kept up for the block; yields its scheduler's address, ``tcp://127.0.0.1:PORT``, to give as
    ``scheduler=`` to as many sweeps as the block runs.  ``"local:N"`` starts and closes such a cluster on every
    call (about 3 s for two spawned workers on this machine); here the start-up is paid once,
    as with a cluster started by ``dask scheduler`` and ``dask worker`` (deploy/dask-cluster.sh) that the CLI
    reaches with ``--scheduler``."""
    kind, n = parse_scheduler(f"local:{int(workers)}")
    with _client(kind, n) as engine:
        yield str(engine.cluster.scheduler_address)


def _run_one(fn: Callable, task: Any, limits: Limits) -> Any:
    """One task on a worker: the project's BLAS threads and the caller's cost budget."""
    blas_threads()
    with using(limits):
        return fn(task)


def _run_chunk(fn: Callable, chunk: bytes, limits: Limits) -> list:
    """Several tasks in one Dask task: a Dask task costs a few ms of scheduling (measured in process: 12.5 ms a
    task against 4.2 ms for the same fit called directly), as much as a fit on the paper mesh.  The chunk's tasks
    arrive pickled (by cloudpickle, as Dask would have sent them) into one ``bytes``: ``Client.submit`` walks its
    arguments looking for Dask objects (``dask._task_spec.parse_input``), and walking 20 task documents was the
    calling process's largest frame."""
    return [_run_one(fn, task, limits) for task in pickle.loads(chunk)]


#: Dask tasks per worker thread: on one thread the tasks are grouped into this many chunks (at least MIN_CHUNKS),
#: few enough to hide Dask's cost a task, enough to move the progress bar; on several, the smallest chunk is a
#: (2 CHUNKS_PER_THREAD threads)-th of the tasks (:func:`chunk_plan`, which replaced four equal chunks a thread).
#: Decision (issue 31, measured on the README's learning curve, fig21's preset, 800 fits, a running cluster of two
#: workers on this 2-core machine): a Dask task costs about 6 ms of the machine's CPU (the client's, the
#: scheduler's and the worker's messages), which on two cores comes out of the workers' time.  Once the fits got
#: faster (the curve's 800 fits take 1.2-1.5 s serially, 2.5 s before) the former minimum of 48 chunks held two
#: workers to 1.32-1.49x the loop's throughput; 8 chunks (four per thread) gave 1.74-1.78x, 16 gave 1.62-1.71x.
#: The chunks are strided, so four per thread are alike in cost and balance the load; the progress bar moves in at
#: least 8 steps.
CHUNKS_PER_THREAD = 4
MIN_CHUNKS = 8


def chunk_count(tasks: int, threads: int) -> int:
    """How many Dask tasks ``tasks`` tasks are sent in on an engine of ``threads`` worker threads:
    :data:`CHUNKS_PER_THREAD` per thread, at least :data:`MIN_CHUNKS`, at most one per task (at least one)."""
    return max(1, min(tasks, max(MIN_CHUNKS, CHUNKS_PER_THREAD * threads)))


def chunk_plan(tasks: int, threads: int) -> list[list[int]]:
    """The task indices of each chunk, in the order they are submitted.

    Sweeps list their tasks from cheap to dear (a learning curve's sizes n grow), so no chunk is a contiguous run of
    them (contiguous chunks left the dearest for last, one worker finishing them while the others idled); every
    chunk holds a share of each kind, and the results still come back in task order.

    * One worker thread has nothing to balance: :func:`chunk_count` chunks of equal size, strided (task j goes to
      chunk j mod the count), so that the progress bar moves in at least :data:`MIN_CHUNKS` steps.
    * Several threads: guided self-scheduling.  Each chunk takes half of the tasks not yet planned divided among the
      threads, ``ceil(left / (2 threads))``, and never fewer than ``ceil(tasks / (2 CHUNKS_PER_THREAD threads))``
      (the 160 resamples of the README's curve on two workers: 40, 30, 23, 17, 13, 10, 10, 10 and 7).  The first
      chunks are large (few of Dask's costs a task), the last small, so the workers finish together: a chunk
      handed to a worker waits behind the one it runs (Dask queues one ahead), and with equal chunks of an eighth
      each the other worker idled for up to one of them at the end.  The tasks are taken in the bit-reversed order
      of their indices, so every chunk, large or small, is spread over the list from cheap to dear.

    Decision (issue 31, the README's learning curve, fig21's preset, a running cluster of two workers on this 2-core
    machine, the plans alternated curve by curve in one process, 20 rounds): the workers were busy (their CPU over
    twice the wall) 0.898 of the curve against 0.844 with 8 equal chunks, higher in 19 of the 20 rounds; x serial
    1.71 against 1.67 (median), 1.71 against 1.65 (pooled).  docs/performance.md has the runs."""
    if threads <= 1 or tasks <= 1:
        n_chunks = chunk_count(tasks, threads)
        return [list(range(j, tasks, n_chunks)) for j in range(n_chunks)]
    bits = (tasks - 1).bit_length()
    order = sorted(range(tasks), key=lambda i: int(format(i, f"0{bits}b")[::-1], 2))
    least = -(-tasks // (2 * CHUNKS_PER_THREAD * threads))
    plan, taken = [], 0
    while taken < tasks:
        size = min(tasks - taken, max(least, -(-(tasks - taken) // (2 * threads))))
        plan.append(sorted(order[taken:taken + size]))
        taken += size
    return plan


def run_tasks(fn: Callable[[Any], Any], tasks: Sequence, scheduler: str | None = None,
              progress: Callable[[int, int], None] | None = None,
              cancel: Callable[[], bool] | None = None,
              on_result: Callable[[int, Any], None] | None = None) -> list:
    """``[fn(t) for t in tasks]``, run by the engine ``scheduler`` names (module docstring), in task order.

    ``fn`` must be a module-level function (it is sent to the workers by reference) and each task a picklable
    value.  ``on_result(index, result)`` is called in the caller's thread for each task as it completes (before
    ``progress``).  An exception in a task is raised here, the other tasks cancelled.  The caller's deadline
    (:func:`bftcore.foundations.limits.deadline`) is checked as tasks complete."""
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
    with _client(kind, arg) as engine:
        return _gather(engine, fn, tasks, limits, progress, cancel, on_result)


class _client:
    """A Dask client for the engine (and the cluster it starts), closed on exit."""

    def __init__(self, kind: str, arg: Any):
        self.kind, self.arg, self.threads = kind, arg, 1
        self.cluster: Any = None
        self.client: Any = None
        #: The address of a scheduler given by address, which failures of the connection name; None otherwise.
        self.address = arg if kind == "address" else None

    def __enter__(self):
        import dask
        from dask.distributed import Client, LocalCluster
        # Dask's scheduler and workers always start an HTTP server (its dashboard and routes), on 0.0.0.0:8787 when
        # no address is given: a port opened on every network each time a user asks for a learning curve.  Ours
        # listen on the loopback only, on a free port, and serve no routes.
        quiet = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": [], **QUIET}
        loopback = {"dashboard_address": "127.0.0.1:0", "worker_dashboard_address": "127.0.0.1:0"}
        with dask.config.set(quiet):
            if self.kind == "inprocess":
                self.client = Client(processes=False, n_workers=1, threads_per_worker=1, **loopback)
            elif self.kind == "local":
                self.cluster = LocalCluster(n_workers=int(self.arg), threads_per_worker=1, processes=True,
                                            host="127.0.0.1", **loopback)
                self.client = Client(self.cluster)
        if self.kind == "address":
            self.client, self.threads = _connect(self.arg)
        else:
            self.threads = max(1, sum(self.client.nthreads().values()))
        return self

    def __exit__(self, *exc):
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        return False


def _connect(address: str) -> tuple[Any, int]:
    """A client of the scheduler at ``address`` and the number of its worker threads (at least 1), with one
    deadline, :data:`CONNECT_SECONDS`, for the connection, Dask's handshake and that first reply; a
    :class:`SchedulerError` naming the address otherwise."""
    from dask.distributed import Client
    from distributed.security import Security

    class BoundedClient(Client):
        """``Client(timeout=)`` bounds the TCP connection and some of the replies but not Dask's handshake
        (``distributed.comm.core.connect`` awaits the peer's first message without a timeout): a peer that accepts
        and stays silent hung the CLI.  ``sync``'s ``callback_timeout`` bounds the whole start instead."""

        def start(self, **kwargs):
            try:
                return super().start(callback_timeout=CONNECT_SECONDS, **kwargs)
            except BaseException:
                with contextlib.suppress(Exception):
                    self.close(timeout=CLOSE_SECONDS)
                raise

    security = None
    if address.startswith("tls://"):
        security = Security(require_encryption=True)
        tls = security.get_tls_config_for_role("client")
        if not (tls["ca_file"] and tls["cert"]):
            raise SchedulerError(address, "needs the cluster's certificates: give --tls-ca-file, --tls-cert and "
                                          "--tls-key (deploy/dask-cluster.sh --tls prints them), or "
                                          "bftcore.foundations.distributed.using_tls in Python")
    started = time.monotonic()
    client = None
    try:
        client = BoundedClient(address, timeout=CONNECT_SECONDS, security=security, set_as_default=False)
        left = CONNECT_SECONDS - (time.monotonic() - started)
        if left <= 0:
            raise TimeoutError("no time left for the first reply")
        nthreads = client.nthreads(callback_timeout=left)
        if not isinstance(nthreads, dict) or not all(type(n) is int and n >= 0 for n in nthreads.values()):
            raise ValueError(f"its count of worker threads is {type(nthreads).__name__}, not a table of numbers")
    except Exception as e:  # noqa: BLE001 - whatever the peer made Dask raise is the peer's failure, named as such
        if client is not None:
            with contextlib.suppress(Exception):
                client.close(timeout=CLOSE_SECONDS)
        raise SchedulerError(address, _connect_failure(e, address)) from None
    return client, max(1, sum(nthreads.values()))


def _connect_failure(e: BaseException, address: str) -> str:
    """What went wrong in reaching the scheduler at ``address``, and what to do (SchedulerError's message)."""
    import ssl
    what = _printable(e)
    if isinstance(e, TimeoutError):
        return (f"did not answer within {CONNECT_SECONDS:g} s (connection, Dask's handshake and first reply); check "
                f"that a Dask scheduler listens there (dask scheduler, or deploy/dask-cluster.sh) and that the port "
                f"is the scheduler's (8786 unless told otherwise), or drop --scheduler to run here")
    if isinstance(e, ssl.SSLError) or "TLS" in what or "certificate" in what:
        return (f"failed the TLS handshake ({what}); a plain scheduler is reached with tcp://, and a TLS one with "
                f"tls:// and certificates signed by the cluster's own certificate authority")
    if isinstance(e, OSError):
        return (f"cannot be reached ({what}); start one with 'dask scheduler' and workers with "
                f"'dask worker {address}' (or deploy/dask-cluster.sh), reach a TLS scheduler with tls://, or drop "
                f"--scheduler to run here")
    return (f"did not answer as a Dask scheduler ({type(e).__name__}: {what}); check that the address is a Dask "
            f"scheduler's, of a compatible Dask version, and that a TLS scheduler is reached with tls://")


def _printable(e: BaseException, width: int = 160) -> str:
    """An exception's text on one line of printable characters (a peer's bytes can reach it), cut to ``width``."""
    text = " ".join(str(e).split()) or type(e).__name__
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= width else text[:width - 3] + "..."


def _gather(engine: _client, fn, tasks, limits, progress, cancel, on_result) -> list:
    """Submit the tasks in chunks, then collect them as they finish (a queue filled by the futures' callbacks, read
    with a timeout so that ``cancel`` is polled while nothing finishes).  A chunk that fails by its own exception
    raises it; one that a scheduler given by address lost raises a SchedulerError naming it."""
    client = engine.client
    chunks = chunk_plan(len(tasks), engine.threads)
    finished: queue.Queue = queue.Queue()
    import cloudpickle  # Dask's own pickler (comes with it): what Dask would have sent, as one bytes
    futures = [client.submit(_run_chunk, fn, cloudpickle.dumps([tasks[i] for i in idx]), limits, pure=False)
               for idx in chunks]
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
                try:
                    results = futures[j].result()
                except Exception as e:
                    if futures[j].status == "error" or engine.address is None:
                        raise  # the task's own exception
                    raise SchedulerError(engine.address, f"lost the tasks ({_printable(e)}); check the scheduler "
                                                         f"and its workers, then run again") from None
                for i, res in zip(chunks[j], results):
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


if __name__ == "__main__":
    print(quiet_environment())
