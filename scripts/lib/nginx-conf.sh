#!/usr/bin/env bash
# Prints an nginx config for the benchmarks: one worker, no access log,
# keep-alive without a request cap.
# Usage: nginx-conf.sh PREFIX PORT [ROOT [HTTP_DIRECTIVES]]
#   without ROOT: every path answers `return 200 "Hello, World!"`;
#   with ROOT: serves the files under ROOT (404 for a missing one), and
#   HTTP_DIRECTIVES (e.g. "sendfile on; tcp_nopush on;") go into the http block.
if [ -n "${3:-}" ]; then
    LOCATION="        root $3;
        location / {
            default_type application/octet-stream;
        }"
else
    LOCATION='        location / {
            default_type text/plain;
            return 200 "Hello, World!";
        }'
fi
EXTRA=""
[ -n "${4:-}" ] && EXTRA="    $4
"
cat <<CONF
daemon off;
worker_processes 1;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 20000; }
worker_rlimit_nofile 20000;
http {
    access_log off;
    keepalive_requests 100000000;
    keepalive_timeout 600s;
    client_body_temp_path $1/body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
${EXTRA}    server {
        listen 127.0.0.1:$2;
$LOCATION
    }
}
CONF
