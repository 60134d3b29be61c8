#!/usr/bin/env bash
# Starts moto's S3 server (PyPI: pip install 'moto[server]') for lab's object-store tests,
# on a free port of 127.0.0.1 (or the port given), and prints the variables the tests
# read; eval them:
#
#   eval "$(tests/s3-server.sh)"      # LAB_TEST_S3=http://127.0.0.1:PORT, LAB_TEST_S3_PID
#   cargo test --test integration artifacts_s3
#   kill "$LAB_TEST_S3_PID"           # when done
#
# moto keeps buckets in memory: nothing is written outside its temporary folder (its log).
# It checks no signature, so any AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY do.
set -euo pipefail
if ! python3 -c 'import moto.server, flask' 2>/dev/null; then
  echo "moto's server is not installed (pip install 'moto[server]')" >&2
  exit 1
fi
port=${1:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
dir=$(mktemp -d /tmp/lab-s3.XXXXXX)
python3 -m moto.server -H 127.0.0.1 -p "$port" >"$dir/server.log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 1 200); do
  if python3 -c "import socket, sys; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then
    echo "export LAB_TEST_S3='http://127.0.0.1:$port' LAB_TEST_S3_PID='$pid' LAB_TEST_S3_DIR='$dir'"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "moto's server stopped; its log:" >&2
    cat "$dir/server.log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "moto's server did not answer on port $port within 20 s; its log: $dir/server.log" >&2
kill "$pid"
exit 1
