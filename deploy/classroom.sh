#!/usr/bin/env bash
# The dashboard for a department: several `panel serve` workers behind nginx (Debian's package), one port.
#
#   bash deploy/classroom.sh --workers 4 --port 8080          # start (in the background), print the address
#   bash deploy/classroom.sh --port 8080 --stop               # stop nginx and the workers of that port
#   bash deploy/classroom.sh --port 8080 --status             # which workers answer
#
# Options: --workers N (default 2), --port P (default 8080), --address A (nginx listens there, default 0.0.0.0),
# --origin HOST[:PORT] (another name the students' browsers use for this machine; repeatable: the machine's own
# names and addresses are allowed already), --frame-ancestors "SOURCE ..." (the pages that may show the dashboard
# in an iframe, e.g. "https://course.example.org"; default 'self': only this server's own pages), --run-dir DIR
# (logs, pid files, the generated nginx.conf; default /tmp/bftcore-classroom-P).
#
# Each worker is `panel serve app` on 127.0.0.1, ports P+1 ... P+N, run by a supervisor (a bash loop of this
# script, one per worker) that starts it again when it dies: after 1 s, doubling up to 60 s while it keeps dying
# within a minute, with a line per restart in logs/supervisor.log.  nginx proxies HTTP and the websockets to
# them with sticky sessions: the first response sets a cookie `bftworker` (a random id), and nginx hashes that
# cookie to pick the worker, so a page and its websocket always reach the same worker (a Bokeh session lives in
# one process), even when a whole class shares one IP address behind a NAT (ip_hash would send them all to one
# worker).  The response header X-BFT-Worker says which worker answered.
#
# nginx takes request lines as long as the longest link the app reads (app.views.share.MAX_QUERY_CHARS), passes
# the websocket's copy of it on (the session token holds no other: app/app_hooks.py), and answers a longer link with a
# page saying to share the setup as a file (deploy/link-too-long.html), where tornado alone would drop the
# connection (a blank page).  Every response carries X-Content-Type-Options,
# Content-Security-Policy frame-ancestors and Referrer-Policy: no-referrer (the link holds the whole setup,
# data included: no request sends it on as a Referer).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"

WORKERS=2
PORT=8080
ADDRESS=0.0.0.0
ACTION=start
ORIGINS=()
FRAME_ANCESTORS="'self'"
RUN_DIR=""
die() { echo "classroom.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) WORKERS="${2:-}"; shift 2 ;;
    --port) PORT="${2:-}"; shift 2 ;;
    --address) ADDRESS="${2:-}"; shift 2 ;;
    --origin) ORIGINS+=("${2:-}"); shift 2 ;;
    --frame-ancestors) FRAME_ANCESTORS="${2:-}"; shift 2 ;;
    --run-dir) RUN_DIR="${2:-}"; shift 2 ;;
    --stop) ACTION=stop; shift ;;
    --status) ACTION=status; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$WORKERS" =~ ^[0-9]+$ ]] && [ "$WORKERS" -ge 1 ] && [ "$WORKERS" -le 32 ] || die "--workers must be 1..32, got '$WORKERS'"
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1024 ] && [ $((PORT + WORKERS)) -le 65535 ] \
  || die "--port must be 1024..65535 with room for the workers above it, got '$PORT'"
RUN_DIR="${RUN_DIR:-/tmp/bftcore-classroom-$PORT}"
# sources of CSP's frame-ancestors, each checked (the value goes into nginx.conf and a response header as it is)
read -r -a FRAME_SOURCES <<<"$FRAME_ANCESTORS" || true
[ "${#FRAME_SOURCES[@]}" -ge 1 ] || die "--frame-ancestors needs at least one source, e.g. 'self' or https://course.example.org"
for src in "${FRAME_SOURCES[@]}"; do
  [[ "$src" =~ ^(\'self\'|\'none\'|https?://(\*\.)?[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?/?)$ ]] \
    || die "--frame-ancestors: '$src' is not 'self', 'none' or an origin like https://course.example.org"
done

NGINX="$(command -v nginx || true)"
[ -z "$NGINX" ] && [ -x /usr/sbin/nginx ] && NGINX=/usr/sbin/nginx
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"

stop() {
  # the supervisors first, so that no worker is started again; each stops its own worker on its way out
  for f in "$RUN_DIR"/supervisor-*.pid; do
    [ -f "$f" ] || continue
    kill "$(cat "$f")" 2>/dev/null || true
  done
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
    for f in "$RUN_DIR"/supervisor-*.pid "$RUN_DIR"/worker-*.pid "$RUN_DIR/nginx.pid"; do
      [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && alive=1
    done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  local killed=""
  for f in "$RUN_DIR"/supervisor-*.pid "$RUN_DIR"/worker-*.pid "$RUN_DIR/nginx.pid"; do
    if [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null; then killed+=" $(cat "$f")"; fi
    rm -f "$f"
  done
  # a killed process still runs while the kernel tears it down (a Python worker's memory takes a moment): return
  # only when each is gone or a zombie, so that "stopped" means nothing of the classroom runs any more
  for pid in $killed; do
    for _ in $(seq 1 50); do
      [ -d "/proc/$pid" ] || break
      grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null && break
      sleep 0.1
    done
  done
  rm -f "$RUN_DIR"/worker-*.restarts
  echo "stopped the classroom on port $PORT"
}

# supervise I PORT: run worker I on PORT, and start it again whenever it exits, until this loop gets SIGTERM
# (from --stop: it then stops its worker and ends).  A worker that keeps dying within a minute of its start waits
# twice as long each time (1 s, 2 s, ... 60 s) so that a broken installation does not spin the CPU.
supervise() {
  set +e
  trap '' HUP
  local i="$1" wport="$2" delay=1 restarts=0 child="" sleeper="" started code ran how
  trap '[ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null; [ -n "$child" ] && kill "$child" 2>/dev/null && wait "$child"
        exit 0' TERM INT
  while :; do
    started=$SECONDS
    nohup "$PYTHON" -m panel serve "$ROOT/app" --port "$wport" --address 127.0.0.1 --use-xheaders --liveness \
      "${ORIGIN_ARGS[@]}" </dev/null >>"$RUN_DIR/logs/worker-$i.log" 2>&1 &
    child=$!
    echo "$child" >"$RUN_DIR/worker-$i.pid"
    wait "$child"
    code=$?
    child=""
    ran=$((SECONDS - started))
    if [ "$ran" -ge 60 ]; then delay=1; fi
    restarts=$((restarts + 1))
    echo "$restarts" >"$RUN_DIR/worker-$i.restarts"
    how="exited with status $code"
    [ "$code" -gt 128 ] && how="was killed by signal $((code - 128))"
    echo "$(date -u '+%Y-%m-%d %H:%M:%S') UTC: worker $i (port $wport) $how after ${ran} s;" \
      "starting it again in ${delay} s (restart $restarts)"
    sleep "$delay" &
    sleeper=$!
    wait "$sleeper"
    sleeper=""
    if [ "$ran" -lt 60 ]; then delay=$((delay * 2 > 60 ? 60 : delay * 2)); fi
  done
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
  local ok=0 note n
  for i in $(seq 1 "$WORKERS"); do
    note=""
    if [ -f "$RUN_DIR/worker-$i.restarts" ]; then
      n="$(cat "$RUN_DIR/worker-$i.restarts")"
      note=", restarted $n time$([ "$n" = 1 ] || echo s) (logs/supervisor.log)"
    fi
    if ! { [ -f "$RUN_DIR/supervisor-$i.pid" ] && kill -0 "$(cat "$RUN_DIR/supervisor-$i.pid")" 2>/dev/null; }; then
      note+=", not supervised"
    fi
    if answers "http://127.0.0.1:$((PORT + i))/liveness"; then echo "worker $i (port $((PORT + i))): up$note"; ok=$((ok + 1));
    else echo "worker $i (port $((PORT + i))): down$note"; fi
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

# the longest request line nginx takes: the longest link query the app reads, its path and "GET ... HTTP/1.1",
# in whole KiB.  Tornado (each worker's HTTP server) drops a request whose request line and headers pass 64 KiB, so
# a buffer over 60 KiB would let nginx forward requests that a worker then drops (nginx's bare 502).
read -r MAX_QUERY MAX_UPLOAD < <("$PYTHON" -c "from app.views.share import MAX_QUERY_CHARS, MAX_UPLOAD_BYTES
print(MAX_QUERY_CHARS, MAX_UPLOAD_BYTES)") && [[ "$MAX_QUERY$MAX_UPLOAD" =~ ^[0-9]+$ ]] \
  || die "could not read the app's limits (app.views.share.MAX_QUERY_CHARS, MAX_UPLOAD_BYTES)"
HEADER_KB=$(( (MAX_QUERY + 1024 + 1023) / 1024 ))
[ "$HEADER_KB" -le 60 ] || die "the app reads links of $MAX_QUERY characters, more than a worker's HTTP server takes"
# the page for a link too long, inside nginx.conf (nginx's worker processes may run as another user, who cannot
# read a file in a private run directory); written as one nginx string: its quotes escaped, and no "$" in it
TOO_LONG_PAGE="$(sed 's/\\/\\\\/g; s/"/\\"/g' "$ROOT/deploy/link-too-long.html")"
[[ "$TOO_LONG_PAGE" != *'$'* ]] || die "deploy/link-too-long.html must not contain a dollar sign (nginx reads it as a variable)"

UPSTREAMS=""
for i in $(seq 1 "$WORKERS"); do
  wport=$((PORT + i))
  rm -f "$RUN_DIR/worker-$i.restarts"
  : >"$RUN_DIR/logs/worker-$i.log"   # this run's log (a restarted worker appends to it)
  supervise "$i" "$wport" </dev/null >>"$RUN_DIR/logs/supervisor.log" 2>&1 &
  echo $! >"$RUN_DIR/supervisor-$i.pid"
  UPSTREAMS+="        server 127.0.0.1:$wport max_fails=0;"$'\n'
done
# the same security headers on every response (error pages included: `always`); add_header in a location replaces
# those of the server level, so each location lists them
SECURITY="add_header X-Content-Type-Options nosniff always;
            add_header Content-Security-Policy \"frame-ancestors ${FRAME_SOURCES[*]}\" always;
            add_header Referrer-Policy no-referrer always;"

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
    # a share link up to the app's limit ($MAX_QUERY characters) is one request line: it must fit one buffer
    large_client_header_buffers 4 ${HEADER_KB}k;
    # the app takes files over its websocket (one message, which nginx passes on whole whatever its size), not as
    # HTTP bodies; no HTTP body is larger than the app's upload limit either
    client_max_body_size $MAX_UPLOAD;
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
        # a link longer than a worker takes: a page that says so (414: the request line; 494, sent as 400
        # "Request Header Or Cookie Too Large": a header line, e.g. a long Referer from a browser that sends one)
        error_page 414 /bft-errors/link-too-long.html;
        error_page 494 =400 /bft-errors/link-too-long.html;
        location = /bft-errors/link-too-long.html {
            internal;
            default_type "text/html; charset=utf-8";
            $SECURITY
            return 200 "$TOO_LONG_PAGE";
        }
        # the address bar changes with every click (the state lives in the link) and Chromium then asks for the
        # icon again: let it keep the icon for a day instead of a request per click
        location = /favicon.ico {
            proxy_pass http://bftcore_workers;
            proxy_hide_header Cache-Control;
            add_header Cache-Control "public, max-age=86400" always;
            $SECURITY
            access_log off;
        }
        # a page's websocket: Bokeh's client repeats the page's query in its address, which is passed on as it
        # is (a session made anew at the websocket, after Bokeh dropped an unused one, reads the link from it); the
        # session token carries no second copy (app/app_hooks.py), so the longest link fits a worker's 64 KiB of
        # request headers
        location ~ /ws\$ {
            proxy_pass http://bftcore_workers;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            proxy_set_header Host \$host;
            proxy_set_header X-Real-IP \$remote_addr;
            proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto \$scheme;
            # a websocket is a tunnel once upgraded: its messages (an uploaded file is one message) pass through
            # whole whatever their size; the timeouts only end a connection silent for an hour
            proxy_buffering off;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
            add_header Set-Cookie "bftworker=\$bft_sticky; Path=/; SameSite=Lax; HttpOnly" always;
            add_header X-BFT-Worker \$upstream_addr always;
            $SECURITY
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
            $SECURITY
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
