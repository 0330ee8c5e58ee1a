#!/usr/bin/env bash
# A Dask cluster for bftcore's sweeps on this machine: one `dask scheduler` and N `dask worker` processes, so that
# `python -m bftcore learning-curve ... --scheduler tcp://HOST:PORT` (and bootstrap, sweep, basins) runs on it.
#
#   bash deploy/dask-cluster.sh --workers 2 --port 8786     # start (in the background), print the address
#   bash deploy/dask-cluster.sh --port 8786 --status        # how many workers the scheduler has
#   bash deploy/dask-cluster.sh --port 8786 --stop          # stop the scheduler and its workers
#
# Options: --workers N (default 2; one thread each: a fit uses one core), --port P (default 8786), --host H (the
# scheduler listens there, default 127.0.0.1, this machine only), --run-dir DIR (logs and pid files; default
# /tmp/bftcore-dask-P), --tls (TLS with certificates: made in DIR/tls unless given by --tls-ca-file F --tls-cert F
# --tls-key F; clients then pass the printed --tls-* options along with the tls:// address).
# A Dask scheduler and its workers run the code they are sent, and a client runs what the scheduler sends back:
# anyone who reaches the port can run code as this user. Use --host only on a trusted network, or with --tls
# (the certificate authority made here is the cluster's own; keep key.pem private: it is the key to the cluster).
# More machines: on each, install bftcore (`pip install -e .` of the same checkout) and run
#   dask worker tcp://HOST:PORT --nthreads 1 --nworkers N   (with --tls: tls://HOST:PORT and the --tls-* options)
# The workers import bftcore to run the fits, so every worker needs the same version of it.
set -euo pipefail
cd "$(dirname "$0")/.."

WORKERS=2
PORT=8786
HOST=127.0.0.1
ACTION=start
RUN_DIR=""
TLS=""
TLS_CA=""
TLS_CERT=""
TLS_KEY=""
die() { echo "dask-cluster.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS="${2:-}"; shift 2 ;;
    --port) PORT="${2:-}"; shift 2 ;;
    --host) HOST="${2:-}"; shift 2 ;;
    --run-dir) RUN_DIR="${2:-}"; shift 2 ;;
    --tls) TLS=1; shift ;;
    --tls-ca-file) TLS=1; TLS_CA="${2:-}"; shift 2 ;;
    --tls-cert) TLS=1; TLS_CERT="${2:-}"; shift 2 ;;
    --tls-key) TLS=1; TLS_KEY="${2:-}"; shift 2 ;;
    --stop) ACTION=stop; shift ;;
    --status) ACTION=status; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$WORKERS" =~ ^[0-9]+$ ]] && [ "$WORKERS" -ge 1 ] && [ "$WORKERS" -le 64 ] || die "--workers must be 1 to 64"
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ "$PORT" -le 65535 ] || die "--port must be 1024 to 65535"
[[ "$HOST" =~ ^[A-Za-z0-9.:_-]+$ ]] || die "--host takes a host name or an IP address, got '$HOST'"
RUN_DIR="${RUN_DIR:-/tmp/bftcore-dask-$PORT}"
PY="${PYTHON:-python}"
# The run dir holds the pid files that --stop kills and, with --tls, the cluster's private key: it must be ours.
mkdir -p -m 700 "$RUN_DIR" || die "cannot create the run dir $RUN_DIR"
[ -O "$RUN_DIR" ] || die "the run dir $RUN_DIR belongs to another user; give --run-dir a folder of yours"
# Whether this run dir's cluster uses TLS, and its files, are remembered for --status.
if [ -z "$TLS" ] && [ "$ACTION" != start ] && [ -f "$RUN_DIR/tls.files" ]; then
  TLS=1
  { read -r TLS_CA; read -r TLS_CERT; read -r TLS_KEY; } <"$RUN_DIR/tls.files"
fi
SCHEME=tcp
TLS_ARGS=()
if [ -n "$TLS" ]; then
  SCHEME=tls
  if [ -z "$TLS_CA$TLS_CERT$TLS_KEY" ]; then
    TLS_CA="$RUN_DIR/tls/ca.pem"; TLS_CERT="$RUN_DIR/tls/cert.pem"; TLS_KEY="$RUN_DIR/tls/key.pem"
  elif [ -z "$TLS_CA" ] || [ -z "$TLS_CERT" ] || [ -z "$TLS_KEY" ]; then
    die "give all three of --tls-ca-file, --tls-cert and --tls-key, or none of them (--tls makes them)"
  fi
  TLS_ARGS=(--tls-ca-file "$TLS_CA" --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY")
fi
ADDR="$SCHEME://$HOST:$PORT"

make_certs() {
  # A certificate authority of this cluster only, and one certificate signed by it for the scheduler, the workers
  # and the clients (what distributed.security.Security.temporary() makes in memory). Dask checks the chain up to
  # the authority, not the host name, so the authority must be the cluster's own. Its key is not kept.
  local dir="$RUN_DIR/tls"
  command -v openssl >/dev/null || die "--tls needs openssl to make certificates (or give --tls-ca-file, --tls-cert, --tls-key)"
  (umask 077 && mkdir -p "$dir")
  [ -O "$dir" ] || die "$dir belongs to another user"
  (
    umask 077
    cd "$dir"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 365 \
      -subj "/CN=bftcore-dask-ca" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem -out cert.csr \
      -subj "/CN=dask-internal"
    printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:dask-internal\n' >ext.cnf
    openssl x509 -req -in cert.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 -out cert.pem -extfile ext.cnf
    rm -f cert.csr ext.cnf ca.srl ca.key
  ) >"$RUN_DIR/openssl.log" 2>&1 || die "openssl could not make the certificates in $dir: see $RUN_DIR/openssl.log"
}

workers_seen() {
  "$PY" - "$ADDR" "$TLS_CA" "$TLS_CERT" "$TLS_KEY" <<'EOF'
import sys
from dask.distributed import Client
from distributed.security import Security
address, ca, cert, key = sys.argv[1:]
security = Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True) if ca else None
try:
    with Client(address, timeout=3, security=security) as c:
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

case "$HOST" in
  127.*|localhost|::1) ;;
  *) [ -n "$TLS" ] || echo "dask-cluster.sh: warning: the scheduler listens on $HOST, not on this machine only." \
       "A Dask scheduler runs the code it is sent: anyone who reaches $HOST:$PORT can run code as $(id -un) here." \
       "Use a trusted network only, or --tls." >&2 ;;
esac
if [ -f "$RUN_DIR/scheduler.pid" ] && kill -0 "$(cat "$RUN_DIR/scheduler.pid")" 2>/dev/null; then
  die "a scheduler of this run dir is running already (pid $(cat "$RUN_DIR/scheduler.pid")); --stop it first"
fi
command -v "${PY%% *}" >/dev/null || die "no python on PATH (set PYTHON=...)"
"$PY" -c "import dask.distributed, bftcore" 2>/dev/null || die "this python lacks dask.distributed or bftcore; pip install -e ."
rm -f "$RUN_DIR/tls.files"
if [ -n "$TLS" ]; then
  if ! { [ -r "$TLS_CA" ] && [ -r "$TLS_CERT" ] && [ -r "$TLS_KEY" ]; }; then
    [ "$TLS_CA" = "$RUN_DIR/tls/ca.pem" ] || die "--tls-ca-file, --tls-cert and --tls-key must be readable files"
    make_certs
  fi
  printf '%s\n' "$TLS_CA" "$TLS_CERT" "$TLS_KEY" >"$RUN_DIR/tls.files"
fi
# Dask's background work slowed down as on the clusters bftcore starts itself (bftcore.foundations.distributed.QUIET)
read -r -a QUIET <<<"$("$PY" -m bftcore.foundations.distributed)"
DASK=("$PY" -m distributed.cli.dask_scheduler)
env "${QUIET[@]}" nohup "${DASK[@]}" --protocol "$SCHEME" --host "$HOST" --port "$PORT" --no-dashboard \
  --pid-file "$RUN_DIR/scheduler.pid" ${TLS_ARGS[@]+"${TLS_ARGS[@]}"} >"$RUN_DIR/scheduler.log" 2>&1 &
for _ in $(seq 100); do grep -q "Scheduler at" "$RUN_DIR/scheduler.log" 2>/dev/null && break; sleep 0.1; done
grep -q "Scheduler at" "$RUN_DIR/scheduler.log" || { stop; die "the scheduler did not start: see $RUN_DIR/scheduler.log"; }
env "${QUIET[@]}" BFTCORE_BLAS_THREADS=1 nohup "$PY" -m distributed.cli.dask_worker "$ADDR" --nworkers "$WORKERS" --nthreads 1 \
  --no-dashboard --local-directory "$RUN_DIR" --pid-file "$RUN_DIR/worker.pid" ${TLS_ARGS[@]+"${TLS_ARGS[@]}"} \
  >"$RUN_DIR/worker.log" 2>&1 &
for _ in $(seq 300); do
  if [ "$(workers_seen)" -ge "$WORKERS" ]; then
    echo "$ADDR ($WORKERS workers; logs in $RUN_DIR)"
    [ -z "$TLS" ] || echo "clients: --scheduler $ADDR ${TLS_ARGS[*]}"
    exit 0
  fi
  sleep 0.2
done
stop
die "the workers did not join within 60 s: see $RUN_DIR/worker.log"
