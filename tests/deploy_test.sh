#!/bin/sh
# deploy_test.sh - two ternion-server replicas on loopback behind Debian's nginx (the setup of
# docs/deploy.md), run by `make deploy-test` (not part of `make test`: it needs nginx,
# `apt-get install nginx-light`). Checks:
#   1. round-robin: 8 requests through nginx are answered by both replicas, alternately;
#   2. failover after a crash: one replica is killed (SIGKILL); the next 8 requests all succeed,
#      answered by the other (nginx retries a refused connection on the next upstream);
#   3. no request lost in a graceful stop: with the first replica started again, 16 requests
#      (4 at a time) run while one replica gets SIGTERM: every one is answered 200 with a
#      completion (in-flight ones finish on the stopping replica, later ones go to the other)
#      and the stopped replica exits 0.
# Uses tests/data/bitnet-tiny on the CPU backend; needs curl and nginx.
set -u
B=${B:-build}
MODEL=tests/data/bitnet-tiny/model.gguf
SRV="$B/ternion-server"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "deploy_test: nginx not found (apt-get install nginx-light)"; exit 1; }
[ -x "$SRV" ] && [ -f "$MODEL" ] || { echo "deploy_test: $SRV or $MODEL missing (make first)"; exit 1; }
tmp=$(mktemp -d) || exit 1
pids=""
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    [ -f "$tmp/nginx.pid" ] && kill "$(cat "$tmp/nginx.pid")" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
fail() { echo "deploy_test: FAIL: $*"; for f in "$tmp"/*.log; do echo "--- $f"; tail -5 "$f"; done; exit 1; }

# start_replica NAME: a server on a free port; sets PID_<NAME> and PORT_<NAME>
start_replica() {
    "$SRV" -m "$MODEL" --device cpu -t 1 --port 0 --parallel 2 --shutdown-grace 30 >/dev/null 2>"$tmp/$1.log" &
    eval "PID_$1=$!"
    pids="$pids $!"
    i=0
    while ! grep -q "listening on" "$tmp/$1.log" 2>/dev/null; do
        i=$((i + 1)); [ $i -gt 600 ] && fail "replica $1 did not start"; sleep 0.1
    done
    eval "PORT_$1=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$tmp/$1.log")"
}

# nginx_conf PORT_A PORT_B: the load balancer of docs/deploy.md, in $tmp, on $LB_PORT
nginx_conf() {
    user=""; [ "$(id -u)" = 0 ] && user="user root root;"
    cat >"$tmp/nginx.conf" <<EOF
$user
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log warn;
events { worker_connections 256; }
http {
    access_log $tmp/nginx-access.log;
    client_body_temp_path $tmp/body; proxy_temp_path $tmp/proxy;
    fastcgi_temp_path $tmp/fcgi; uwsgi_temp_path $tmp/uwsgi; scgi_temp_path $tmp/scgi;
    upstream ternion {
        server 127.0.0.1:$1 max_fails=1 fail_timeout=30s;
        server 127.0.0.1:$2 max_fails=1 fail_timeout=30s;
    }
    server {
        listen 127.0.0.1:$LB_PORT;
        location / {
            proxy_pass http://ternion;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            add_header X-Upstream \$upstream_addr always;
        }
    }
}
EOF
}

# ask N: one completion through nginx; prints "STATUS UPSTREAM"
ask() {
    curl -sS -o "$tmp/ans.$1" -D "$tmp/hdr.$1" -w '%{http_code}' "http://127.0.0.1:$LB_PORT/v1/completions" \
        -H 'Content-Type: application/json' \
        -d "{\"prompt\":\"Request $1: in the beginning\",\"max_tokens\":24,\"temperature\":0}" >"$tmp/code.$1" 2>/dev/null
    up=$(sed -n 's/^X-Upstream: \(.*\)\r$/\1/p' "$tmp/hdr.$1" | tail -1)
    echo "$(cat "$tmp/code.$1") $up"
}

start_replica A
start_replica B
echo "replicas on ports $PORT_A and $PORT_B"
for try in 1 2 3 4 5; do
    LB_PORT=$(( (($$ + try * 7919) % 20000) + 30000 ))
    nginx_conf "$PORT_A" "$PORT_B"
    "$NGINX" -c "$tmp/nginx.conf" -p "$tmp" 2>"$tmp/nginx-start.log" && break
    LB_PORT=""
done
[ -n "$LB_PORT" ] || fail "nginx did not start: $(cat "$tmp/nginx-start.log")"
i=0
until curl -s -o /dev/null "http://127.0.0.1:$LB_PORT/health"; do
    i=$((i + 1)); [ $i -gt 100 ] && fail "nginx does not answer"; sleep 0.1
done
echo "nginx on port $LB_PORT"

# 1. round-robin
: >"$tmp/rr"
for n in 1 2 3 4 5 6 7 8; do ask "$n" >>"$tmp/rr"; done
[ "$(grep -c '^200 ' "$tmp/rr")" = 8 ] || fail "round-robin: not every answer is 200: $(cat "$tmp/rr")"
a=$(grep -c ":$PORT_A\$" "$tmp/rr"); b=$(grep -c ":$PORT_B\$" "$tmp/rr")
[ "$a" = 4 ] && [ "$b" = 4 ] || fail "round-robin: $a answers from A, $b from B: $(cat "$tmp/rr")"
alt=$(awk '{print $2}' "$tmp/rr" | uniq | wc -l)
[ "$alt" = 8 ] || fail "round-robin: the replicas did not alternate: $(cat "$tmp/rr")"
echo "1. round-robin: 8 answers, 4 from each replica, alternating"

# 2. failover after a crash
kill -9 "$PID_A"; wait "$PID_A" 2>/dev/null
: >"$tmp/fo"
for n in 11 12 13 14 15 16 17 18; do ask "$n" >>"$tmp/fo"; done
[ "$(grep -c "^200 .*:$PORT_B\$" "$tmp/fo")" = 8 ] || fail "failover: $(cat "$tmp/fo")"
echo "2. failover: replica A killed, 8 of 8 requests answered 200 by replica B"

# 3. a graceful stop loses nothing
start_replica A
nginx_conf "$PORT_A" "$PORT_B"
"$NGINX" -c "$tmp/nginx.conf" -p "$tmp" -s reload || fail "nginx reload"
sleep 1
seq 21 36 | xargs -P 4 -I{} sh -c 'echo "$(curl -sS -o '"$tmp"'/ans.{} -w "%{http_code}" http://127.0.0.1:'"$LB_PORT"'/v1/completions -H "Content-Type: application/json" -d "{\"prompt\":\"Request {}: in the beginning\",\"max_tokens\":48,\"temperature\":0}") {}"' >"$tmp/gs" &
load=$!
i=0
while [ "$(wc -l <"$tmp/gs")" -lt 3 ]; do i=$((i + 1)); [ $i -gt 600 ] && fail "no answers"; sleep 0.05; done
kill -TERM "$PID_B"
wait "$PID_B"; st=$?
wait "$load"
[ "$st" = 0 ] || fail "replica B exited with $st after SIGTERM"
[ "$(grep -c '^200 ' "$tmp/gs")" = 16 ] || fail "graceful stop: $(sort -k2 -n "$tmp/gs" | tr '\n' ' ')"
for n in $(seq 21 36); do grep -q '"finish_reason":"' "$tmp/ans.$n" || fail "request $n: no completion: $(cat "$tmp/ans.$n")"; done
echo "3. graceful stop: replica B stopped (exit 0) under load, 16 of 16 requests answered 200 with a completion"
echo "deploy_test: passed"
