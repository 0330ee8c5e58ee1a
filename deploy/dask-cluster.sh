#!/usr/bin/env bash
# A Dask cluster for bftcore's sweeps on this machine: one `dask scheduler` and N `dask worker` processes, so that
# `python -m bftcore learning-curve ... --scheduler tcp://HOST:PORT` (and bootstrap, sweep, basins) runs on it.
#
#   bash deploy/dask-cluster.sh --workers 2 --port 8786     # start (in the background), print the address
#   bash deploy/dask-cluster.sh --port 8786 --status        # how many workers the scheduler has
#   bash deploy/dask-cluster.sh --port 8786 --stop          # stop the scheduler and its workers
#
# Options: --workers N (default 2; one thread each: a fit uses one core), --port P (default 8786), --host H (the
# scheduler listens there, default 127.0.0.1; use the machine's address to let workers on other machines join),
# --run-dir DIR (logs and pid files; default /tmp/bftcore-dask-P).
# More machines: on each, install bftcore (`pip install -e .` of the same checkout) and run
#   dask worker tcp://HOST:PORT --nthreads 1 --nworkers N
# The workers import bftcore to run the fits, so every worker needs the same version of it.
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=2
PORT=8786
HOST=127.0.0.1
ACTION=start
RUN_DIR=""
die() { echo "dask-cluster.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS="${2:-}"; shift 2 ;;
    --port) PORT="${2:-}"; shift 2 ;;
    --host) HOST="${2:-}"; shift 2 ;;
    --run-dir) RUN_DIR="${2:-}"; shift 2 ;;
    --stop) ACTION=stop; shift ;;
    --status) ACTION=status; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$WORKERS" =~ ^[0-9]+$ ]] && [ "$WORKERS" -ge 1 ] && [ "$WORKERS" -le 64 ] || die "--workers must be 1 to 64"
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65535 ] || die "--port must be 1024 to 65535"
RUN_DIR="${RUN_DIR:-/tmp/bftcore-dask-$PORT}"
PY="${PYTHON:-python}"
ADDR="tcp://$HOST:$PORT"

workers_seen() {
  "$PY" - "$ADDR" <<'EOF'
import sys
from dask.distributed import Client
try:
    with Client(sys.argv[1], timeout=3) as c:
        print(len(c.scheduler_info(n_workers=-1)["workers"]))
except OSError:
    print(-1)
EOF
}

stop() {
  for f in "$RUN_DIR"/worker.pid "$RUN_DIR"/scheduler.pid; do
    if [ -f "$f" ]; then
      pid="$(cat "$f")"
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$f"
    fi
  done
}

case "$ACTION" in
  stop) stop; echo "stopped the Dask cluster of port $PORT"; exit 0 ;;
  status) n="$(workers_seen)"; [ "$n" -ge 0 ] || die "no scheduler answers at $ADDR"
          echo "$ADDR: $n workers"; exit 0 ;;
esac

mkdir -p "$RUN_DIR"
if [ -f "$RUN_DIR/scheduler.pid" ] && kill -0 "$(cat "$RUN_DIR/scheduler.pid")" 2>/dev/null; then
  die "a scheduler of this run dir is running already (pid $(cat "$RUN_DIR/scheduler.pid")); --stop it first"
fi
command -v "${PY%% *}" >/dev/null || die "no python on PATH (set PYTHON=...)"
"$PY" -c "import dask.distributed, bftcore" 2>/dev/null || die "this python lacks dask.distributed or bftcore; pip install -e ."
DASK=("$PY" -m distributed.cli.dask_scheduler)
nohup "${DASK[@]}" --host "$HOST" --port "$PORT" --no-dashboard --pid-file "$RUN_DIR/scheduler.pid" \
  >"$RUN_DIR/scheduler.log" 2>&1 &
for _ in $(seq 100); do grep -q "Scheduler at" "$RUN_DIR/scheduler.log" 2>/dev/null && break; sleep 0.1; done
grep -q "Scheduler at" "$RUN_DIR/scheduler.log" || { stop; die "the scheduler did not start: see $RUN_DIR/scheduler.log"; }
BFTCORE_BLAS_THREADS=1 nohup "$PY" -m distributed.cli.dask_worker "$ADDR" --nworkers "$WORKERS" --nthreads 1 \
  --no-dashboard --local-directory "$RUN_DIR" --pid-file "$RUN_DIR/worker.pid" >"$RUN_DIR/worker.log" 2>&1 &
for _ in $(seq 300); do
  [ "$(workers_seen)" -ge "$WORKERS" ] && { echo "$ADDR ($WORKERS workers; logs in $RUN_DIR)"; exit 0; }
  sleep 0.2
done
stop
die "the workers did not join within 60 s: see $RUN_DIR/worker.log"
