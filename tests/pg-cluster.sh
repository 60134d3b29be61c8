#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster (Debian's server: apt-get install postgresql) for
# lab's PostgreSQL tests, on a free port of 127.0.0.1 with password authentication, and
# prints the variables the tests read; eval them:
#
#   eval "$(tests/pg-cluster.sh)"     # LAB_TEST_POSTGRES=postgres://lab:…@127.0.0.1:PORT/postgres
#   cargo test --workspace
#   "$LAB_TEST_POSTGRES_BIN/pg_ctl" -D "$LAB_TEST_POSTGRES_DIR/data" stop   # when done
#
# As root (CI runs as root) the server runs as the unprivileged `postgres` user, since
# PostgreSQL refuses to run as root. Nothing is written outside its temporary folder.
set -euo pipefail
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
if [ -z "$bin" ]; then
  echo "no PostgreSQL server in /usr/lib/postgresql (Debian: apt-get install postgresql)" >&2
  exit 1
fi
dir=$(mktemp -d /tmp/lab-pg.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
password=$(head -c 18 /dev/urandom | base64 | tr -d '/+=')
printf '%s\n' "$password" > "$dir/pwfile"
as=()
if [ "$(id -u)" = 0 ]; then
  chown -R postgres "$dir"
  as=(runuser -u postgres --)
fi
"${as[@]}" "$bin/initdb" -D "$dir/data" -U lab --pwfile="$dir/pwfile" --auth-local=trust --auth-host=scram-sha-256 \
  --no-sync >"$dir/initdb.log"
rm -f "$dir/pwfile"
# TLS for the sslmode tests: a CA that signs the server's certificate (valid for the name
# `localhost` only, not for 127.0.0.1: verify-full by address fails, verify-ca passes), and a
# CA that signed nothing here.
tls=()
if command -v openssl >/dev/null; then
  (
    cd "$dir"
    for ca in ca other-ca; do
      openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=lab test $ca" \
        -keyout "$ca.key" -out "$ca.pem" 2>/dev/null
    done
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr 2>/dev/null
    printf 'subjectAltName=DNS:localhost\n' > san.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile san.ext \
      -out server.pem 2>/dev/null
    chmod 600 server.key
  )
  [ "$(id -u)" = 0 ] && chown postgres "$dir"/server.key "$dir"/server.pem
  tls=(-c ssl=on -c "ssl_cert_file=$dir/server.pem" -c "ssl_key_file=$dir/server.key")
fi
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -w -l "$dir/server.log" \
  -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 ${tls[*]}" start >/dev/null
echo "export LAB_TEST_POSTGRES='postgres://lab:$password@127.0.0.1:$port/postgres'"
echo "export LAB_TEST_POSTGRES_DIR='$dir' LAB_TEST_POSTGRES_BIN='$bin'"
if [ ${#tls[@]} -gt 0 ]; then
  echo "export LAB_TEST_POSTGRES_CA='$dir/ca.pem' LAB_TEST_POSTGRES_OTHER_CA='$dir/other-ca.pem'"
fi
