#!/usr/bin/env bash
# The dashboard for a department: several `panel serve` workers behind nginx (Debian's package), one port.
#
#   bash deploy/classroom.sh --workers 4 --port 8080          # start (in the background), print the address
#   bash deploy/classroom.sh --port 8080 --stop               # stop nginx and the workers of that port
#   bash deploy/classroom.sh --port 8080 --status             # which workers answer
#
# Options: --workers N (default 2), --port P (default 8080), --address A (nginx listens there, default 0.0.0.0),
# --origin HOST[:PORT] (another name the students' browsers use for this machine; repeatable: the machine's own
# names and addresses are allowed already), --run-dir DIR (logs, pid files, the generated nginx.conf; default
# /tmp/bftcore-classroom-P).
#
# Each worker is `panel serve app` on 127.0.0.1, ports P+1 ... P+N.  nginx proxies HTTP and the websockets to
# them with sticky sessions: the first response sets a cookie `bftworker` (a random id), and nginx hashes that
# cookie to pick the worker, so a page and its websocket always reach the same worker (a Bokeh session lives in
# one process), even when a whole class shares one IP address behind a NAT (ip_hash would send them all to one
# worker).  The response header X-BFT-Worker says which worker answered.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

WORKERS=2
PORT=8080
ADDRESS=0.0.0.0
ACTION=start
ORIGINS=()
RUN_DIR=""
die() { echo "classroom.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS="${2:-}"; shift 2 ;;
    --port) PORT="${2:-}"; shift 2 ;;
    --address) ADDRESS="${2:-}"; shift 2 ;;
    --origin) ORIGINS+=("${2:-}"); shift 2 ;;
    --run-dir) RUN_DIR="${2:-}"; shift 2 ;;
    --stop) ACTION=stop; shift ;;
    --status) ACTION=status; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$WORKERS" =~ ^[0-9]+$ ]] && [ "$WORKERS" -ge 1 ] && [ "$WORKERS" -le 32 ] || die "--workers must be 1..32, got '$WORKERS'"
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ $((PORT + WORKERS)) -le 65535 ] \
  || die "--port must be 1024..65535 with room for the workers above it, got '$PORT'"
RUN_DIR="${RUN_DIR:-/tmp/bftcore-classroom-$PORT}"

NGINX="$(command -v nginx || true)"
[ -z "$NGINX" ] && [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"

stop() {
  if [ -f "$RUN_DIR/nginx.pid" ]; then
    "$NGINX" -p "$RUN_DIR" -c "$RUN_DIR/nginx.conf" -s quit 2>/dev/null || kill "$(cat "$RUN_DIR/nginx.pid")" 2>/dev/null || true
  fi
  for f in "$RUN_DIR"/worker-*.pid; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
  done
  # wait until every process has gone (a worker finishes its open requests first)
  for _ in $(seq 1 100); do
    alive=0
    for f in "$RUN_DIR"/worker-*.pid "$RUN_DIR/nginx.pid"; do
      [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && alive=1
    done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for f in "$RUN_DIR"/worker-*.pid "$RUN_DIR/nginx.pid"; do
    [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  echo "stopped the classroom on port $PORT"
}

# answers [--wait SECONDS] URL...: whether every URL answers 200 (waiting up to SECONDS for them), in one process
answers() { "$PYTHON" - "$@" <<'EOF'
import sys, time, urllib.request
args = sys.argv[1:]
wait = float(args[1]) if args[:1] == ["--wait"] else 0.0
urls = args[2:] if args[:1] == ["--wait"] else args
end = time.monotonic() + wait
for url in urls:
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read(64)
            break
        except Exception:
            if time.monotonic() > end:
                sys.exit(1)
            time.sleep(0.1)
EOF
}

status() {
  local ok=0
  for i in $(seq 1 "$WORKERS"); do
    if answers "http://127.0.0.1:$((PORT + i))/liveness"; then echo "worker $i (port $((PORT + i))): up"; ok=$((ok + 1));
    else echo "worker $i (port $((PORT + i))): down"; fi
  done
  if answers "http://127.0.0.1:$PORT/liveness"; then echo "nginx (port $PORT): up"; else echo "nginx (port $PORT): down"; ok=-1; fi
  [ "$ok" = "$WORKERS" ]
}

if [ "$ACTION" = stop ]; then stop; exit 0; fi
if [ "$ACTION" = status ]; then status; exit $?; fi

[ -n "$NGINX" ] || die "nginx is not installed: apt-get install nginx (Debian's package), then run this again"
"$PYTHON" -c "import bftcore, panel, app" 2>/dev/null \
  || die "bftcore and its dashboard are not installed for $PYTHON: pip install -e . (or set PYTHON=...)"
mkdir -p "$RUN_DIR/logs" "$RUN_DIR/tmp"
if [ -f "$RUN_DIR/nginx.pid" ] && kill -0 "$(cat "$RUN_DIR/nginx.pid")" 2>/dev/null; then
  die "a classroom already runs on port $PORT (bash deploy/classroom.sh --port $PORT --stop first)"
fi
for p in "$PORT" $(seq $((PORT + 1)) $((PORT + WORKERS))); do
  if "$PYTHON" -c "import socket,sys; s=socket.socket(); s.settimeout(0.5); sys.exit(0 if s.connect_ex(('127.0.0.1', $p)) == 0 else 1)"; then
    die "port $p is in use; choose another --port"
  fi
done

# the names the students' browsers may use for this machine (the websocket's Origin must be one of them)
ALLOW=("localhost:$PORT" "127.0.0.1:$PORT")
for h in $(hostname 2>/dev/null) $(hostname -f 2>/dev/null) $(hostname -I 2>/dev/null); do
  [[ "$h" == *:* ]] || ALLOW+=("$h:$PORT")   # IPv6 addresses: give them with --origin '[addr]:port' if needed
done
for o in "${ORIGINS[@]+"${ORIGINS[@]}"}"; do
  if [[ "$o" == *:* ]]; then ALLOW+=("$o"); else ALLOW+=("$o:$PORT"); fi
done
ORIGIN_ARGS=()
for a in $(printf '%s\n' "${ALLOW[@]}" | sort -u); do ORIGIN_ARGS+=(--allow-websocket-origin "$a"); done

UPSTREAMS=""
for i in $(seq 1 "$WORKERS"); do
  wport=$((PORT + i))
  nohup "$PYTHON" -m panel serve "$ROOT/app" --port "$wport" --address 127.0.0.1 --use-xheaders --liveness \
    "${ORIGIN_ARGS[@]}" >"$RUN_DIR/logs/worker-$i.log" 2>&1 &
  echo $! >"$RUN_DIR/worker-$i.pid"
  UPSTREAMS+="        server 127.0.0.1:$wport max_fails=0;"$'\n'
done

cat >"$RUN_DIR/nginx.conf" <<EOF
# generated by deploy/classroom.sh for port $PORT with $WORKERS workers
worker_processes 1;
pid $RUN_DIR/nginx.pid;
error_log $RUN_DIR/logs/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log $RUN_DIR/logs/nginx-access.log;
    client_body_temp_path $RUN_DIR/tmp/body;
    proxy_temp_path $RUN_DIR/tmp/proxy;
    fastcgi_temp_path $RUN_DIR/tmp/fastcgi;
    uwsgi_temp_path $RUN_DIR/tmp/uwsgi;
    scgi_temp_path $RUN_DIR/tmp/scgi;
    # sticky sessions: a browser keeps the worker its first request was hashed to (see deploy/classroom.sh)
    map \$cookie_bftworker \$bft_sticky {
        ""      \$request_id;
        default \$cookie_bftworker;
    }
    map \$http_upgrade \$connection_upgrade {
        default upgrade;
        ""      close;
    }
    upstream bftcore_workers {
        hash \$bft_sticky consistent;
$UPSTREAMS    }
    server {
        listen $ADDRESS:$PORT;
        # the address bar changes with every click (the state lives in the link) and Chromium then asks for the
        # icon again: let it keep the icon for a day instead of a request per click
        location = /favicon.ico {
            proxy_pass http://bftcore_workers;
            proxy_hide_header Cache-Control;
            add_header Cache-Control "public, max-age=86400" always;
            access_log off;
        }
        location / {
            proxy_pass http://bftcore_workers;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            proxy_set_header Host \$host;
            proxy_set_header X-Real-IP \$remote_addr;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto \$scheme;
            proxy_buffering off;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
            add_header Set-Cookie "bftworker=\$bft_sticky; Path=/; SameSite=Lax; HttpOnly" always;
            add_header X-BFT-Worker \$upstream_addr always;
        }
    }
}
EOF

"$NGINX" -t -p "$RUN_DIR" -c "$RUN_DIR/nginx.conf" >"$RUN_DIR/logs/nginx-test.log" 2>&1 \
  || { cat "$RUN_DIR/logs/nginx-test.log" >&2; stop >/dev/null; die "nginx refused the generated configuration"; }

# wait for the workers (a cold start imports numpy, scipy, panel: a few seconds), then start nginx
URLS=()
for i in $(seq 1 "$WORKERS"); do URLS+=("http://127.0.0.1:$((PORT + i))/liveness"); done
if ! answers --wait 120 "${URLS[@]}"; then
  for i in $(seq 1 "$WORKERS"); do tail -n 5 "$RUN_DIR/logs/worker-$i.log" >&2; done
  stop >/dev/null; die "the workers did not start within 120 s (logs above)"
fi
"$NGINX" -p "$RUN_DIR" -c "$RUN_DIR/nginx.conf"
answers --wait 10 "http://127.0.0.1:$PORT/liveness" || true
status >/dev/null || { stop >/dev/null; die "the classroom did not come up; logs in $RUN_DIR/logs"; }
shown="$ADDRESS"; [ "$ADDRESS" = 0.0.0.0 ] && shown="$(hostname -I 2>/dev/null | awk '{print $1}')"
echo "classroom up: http://${shown:-localhost}:$PORT/app ($WORKERS workers; logs in $RUN_DIR/logs)"
echo "stop it with: bash deploy/classroom.sh --port $PORT --stop"
