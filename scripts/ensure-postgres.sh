#!/usr/bin/env bash
# Make sure a PostgreSQL server answers at DATABASE_URL (by default
# postgres://postgres@127.0.0.1:5432/belvedir), as scripts/ensure-docker.sh does for dockerd.
#
# Idempotent and quick when a server answers: one that answers is used as it is, never
# reconfigured. Otherwise, when the URL's host is this machine (run as root): installs Debian's
# `postgresql` where missing, creates a cluster on the URL's port when there is none
# (pg_createcluster), starts it (pg_ctlcluster: its own daemon and log, not tied to this
# shell), and then, as the server's `postgres` user over its local socket, creates the URL's
# role (LOGIN CREATEDB; the tests create their own databases) and database where missing. A
# URL without a password is trusted from 127.0.0.1 and ::1 for that role (lines added at the
# top of the cluster's pg_hba.conf, marked "belvedir"); a URL with one gets it set on the role
# and keeps Debian's scram-sha-256. `manage.py ensure_database` (scripts/up.sh) creates the
# database on a server that was already running.
set -euo pipefail
cd "$(dirname "$0")/.."

URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/belvedir}
WAIT_SECONDS=${POSTGRES_WAIT_SECONDS:-60}

say() { echo "ensure-postgres: $*"; }
die() {
    echo "ensure-postgres: ERROR: $*" >&2
    exit 1
}

# host, port, role, password, database: one a line (a password may hold anything but a newline).
mapfile -t parts < <(python3 - "$URL" <<'PY'
import sys
from urllib.parse import unquote, urlsplit
url = urlsplit(sys.argv[1])
if url.scheme not in ("postgres", "postgresql", "pgsql"):
    sys.exit(f"DATABASE_URL must be a PostgreSQL URL (postgres://user@host:5432/name), not {url.scheme}://")
print(url.hostname or "127.0.0.1", url.port or 5432, unquote(url.username or "postgres"),
      unquote(url.password or ""), unquote(url.path.lstrip("/")) or "belvedir", sep="\n")
PY
) || die "cannot read DATABASE_URL"
[ ${#parts[@]} = 5 ] || die "cannot read DATABASE_URL"
HOST=${parts[0]} PORT=${parts[1]} ROLE=${parts[2]} PASSWORD=${parts[3]} NAME=${parts[4]}

answers() {
    if command -v pg_isready >/dev/null 2>&1; then
        pg_isready -q -h "$HOST" -p "$PORT" -t 5
    else
        (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null
    fi
}

if answers; then
    say "PostgreSQL answers at $HOST:$PORT; used as it is"
    exit 0
fi

case "$HOST" in
    127.0.0.1 | localhost | ::1) ;;
    *) die "no PostgreSQL answers at $HOST:$PORT, which is not this machine: start it there, or set DATABASE_URL" ;;
esac
[ "$(id -u)" = 0 ] || die "no PostgreSQL answers at $HOST:$PORT and we are not root (cannot install or start one)"

if ! command -v pg_lsclusters >/dev/null 2>&1 || ! compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
    say "apt-get install postgresql"
    apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql \
        || die "apt-get install postgresql failed"
fi

# The cluster on the URL's port (version, name, status), else a new one of the newest version.
read -r VERSION CLUSTER STATUS < <(pg_lsclusters -h | awk -v port="$PORT" '$3 == port {print $1, $2, $4; exit}') || true
if [ -z "${VERSION:-}" ]; then
    VERSION=$(find /usr/lib/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)
    CLUSTER=main
    [ -d "/etc/postgresql/$VERSION/main" ] && CLUSTER=belvedir  # main is on another port
    say "creating cluster $VERSION/$CLUSTER on port $PORT"
    pg_createcluster --port "$PORT" "$VERSION" "$CLUSTER" >/dev/null
    STATUS=down
fi
if [ "$STATUS" != online ]; then
    say "starting cluster $VERSION/$CLUSTER (log: /var/log/postgresql/postgresql-$VERSION-$CLUSTER.log)"
    pg_ctlcluster "$VERSION" "$CLUSTER" start || die "cluster $VERSION/$CLUSTER did not start"
fi

# As the server's superuser over its local socket (peer authentication, Debian's default).
as_postgres() { runuser -u postgres -- env -u PGHOST psql -X -q -p "$PORT" -v ON_ERROR_STOP=1 "$@"; }

for _ in $(seq 1 "$WAIT_SECONDS"); do
    as_postgres -d postgres -c "SELECT 1" >/dev/null 2>&1 && break
    sleep 1
done
as_postgres -d postgres -c "SELECT 1" >/dev/null || die "cluster $VERSION/$CLUSTER does not answer on its socket"

as_postgres -d postgres -v role="$ROLE" -v password="$PASSWORD" -v db="$NAME" <<'SQL'
SELECT format('CREATE ROLE %I LOGIN CREATEDB', :'role')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('ALTER ROLE %I PASSWORD %L', :'role', :'password') WHERE :'password' <> '' \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'db', :'role')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'db') \gexec
SQL

HBA=/etc/postgresql/$VERSION/$CLUSTER/pg_hba.conf
if [ -z "$PASSWORD" ] && ! grep -q "^# belvedir: $ROLE " "$HBA"; then
    say "trusting role $ROLE from 127.0.0.1 and ::1 ($HBA; put a password in DATABASE_URL instead to keep scram-sha-256)"
    {
        echo "# belvedir: $ROLE without a password from this machine (scripts/ensure-postgres.sh)"
        echo "host all $ROLE 127.0.0.1/32 trust"
        echo "host all $ROLE ::1/128 trust"
        cat "$HBA"
    } >"$HBA.belvedir.tmp"
    chown --reference="$HBA" "$HBA.belvedir.tmp"
    chmod --reference="$HBA" "$HBA.belvedir.tmp"
    mv "$HBA.belvedir.tmp" "$HBA"
    pg_ctlcluster "$VERSION" "$CLUSTER" reload
fi

for _ in $(seq 1 "$WAIT_SECONDS"); do
    if answers; then
        say "PostgreSQL $VERSION/$CLUSTER is up at $HOST:$PORT"
        exit 0
    fi
    sleep 1
done
die "PostgreSQL did not answer at $HOST:$PORT within ${WAIT_SECONDS}s; see /var/log/postgresql/postgresql-$VERSION-$CLUSTER.log"
