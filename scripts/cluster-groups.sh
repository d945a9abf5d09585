#!/usr/bin/env bash
# The django-q2 clusters scripts/up.sh starts, each in a process group of its own (setsid),
# are listed in $VAR/cluster-groups with the up.sh that owns them. up.sh stops them itself when
# it is stopped; killed with SIGKILL it cannot, and they go on without a web server (claiming
# runs, making warm sandboxes). So up.sh's next start, and the make up test's teardown, stop
# the groups an up.sh that is gone left behind:
#
#   bash scripts/cluster-groups.sh stop VAR      # or: source it, cluster_groups_stop VAR
#
# Each entry holds the process's start time (/proc/PID/stat), so an id the kernel gave to
# another program since is never signalled; and nothing is signalled while the owner runs.

cluster_groups_file() { echo "$1/cluster-groups"; }

# The start time of process $1 (clock ticks after boot), or nothing when it is gone.
cluster_start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }  # past "pid (comm) ": the comm may hold spaces and parentheses
  # shellcheck disable=SC2086
  set -- $stat
  echo "${20}"
}

# Whether process $1 is the one that started at $2.
cluster_same_process() { [ -n "$2" ] && [ "$(cluster_start_time "$1")" = "$2" ]; }

# cluster_groups_record VAR PGID...: this shell ($$) owns these groups.
cluster_groups_record() {
  local var=$1 file group
  shift
  file=$(cluster_groups_file "$var")
  {
    echo "owner $$ $(cluster_start_time $$)"
    for group in "$@"; do echo "group $group $(cluster_start_time "$group")"; done
  } >"$file.tmp"
  mv "$file.tmp" "$file"
}

# cluster_groups_stop VAR: stop the groups listed in VAR/cluster-groups when their owner is
# gone (TERM, then KILL after 10 s), and forget them.
cluster_groups_stop() {
  local var=$1 file kind pid started live=() group alive
  file=$(cluster_groups_file "$var")
  [ -f "$file" ] || return 0
  while read -r kind pid started; do
    if [ "$kind" = owner ] && cluster_same_process "$pid" "$started"; then
      return 0  # its up.sh still runs: its clusters are not left over
    fi
    if [ "$kind" = group ] && cluster_same_process "$pid" "$started"; then live+=("$pid"); fi
  done <"$file"
  if [ ${#live[@]} -gt 0 ]; then
    echo "up: stopping the django-q2 clusters an earlier start left running" \
      "(process groups ${live[*]})" >&2
    for group in "${live[@]}"; do kill -TERM -- "-$group" 2>/dev/null || true; done
    for _ in $(seq 1 50); do
      alive=0
      for group in "${live[@]}"; do kill -0 -- "-$group" 2>/dev/null && alive=1; done
      [ "$alive" = 0 ] && break
      sleep 0.2
    done
    for group in "${live[@]}"; do kill -KILL -- "-$group" 2>/dev/null || true; done
  fi
  rm -f "$file"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
    stop) [ -n "${2:-}" ] && cluster_groups_stop "$2" && exit 0 ;;
  esac
  echo "usage: bash scripts/cluster-groups.sh stop VAR" >&2
  exit 2
fi
