#!/usr/bin/env bash
# Kills a test run at a random moment and runs it again, twice: a killed run
# must leave nothing that breaks the next one (issue 35, item 5). Run by
# hand; the default command is the whole suite:
#
#   scripts/kill-rerun.sh                                  # ./scripts/test.sh
#   scripts/kill-rerun.sh -- go test -count=1 ./cluster/slurm/...
#   scripts/kill-rerun.sh --within 120 --seed 7 -- go test -count=1 ./e2e -run TestSlurm
#
# Each round starts the command in a session of its own, SIGKILLs that whole
# session after a random delay of 5 s to --within seconds (default 600; a
# round whose command ends first is reported and kills nothing), lists what
# outlived it (the emulated partition's daemons and job steps, dev servers,
# simulated engines: processes of the killed run's session survive only if
# they started sessions of their own), and then runs the command again to
# its end without touching any of it. The script exits 1 unless every rerun
# passed. --seed makes the delays repeatable.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
within=600
rounds=2
seed=""
while [ $# -gt 0 ]; do
  case "$1" in
    --within) within=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --) shift; break ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--within SECONDS] [--rounds N] [--seed N] [-- COMMAND...]" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || set -- ./scripts/test.sh
if ! [[ "$within" =~ ^[0-9]+$ ]] || [ "$within" -lt 6 ]; then
  echo "--within $within: want whole seconds, at least 6" >&2
  exit 2
fi
[ -n "$seed" ] && RANDOM=$seed

logs=$(mktemp -d /tmp/kill-rerun.XXXXXX)
say() { echo "kill-rerun: $*"; }
# survivors lists the processes a killed run may leave behind.
survivors() {
  ps -eo pid,stat,etimes,args --sort=start_time |
    awk 'NR > 1 && $2 !~ /Z/ && /munged|slurmctld|slurmd|slurmstepd|temporal|sweepflow-devserver|starter sim|postgres|worker --cluster/ && !/awk/' |
    sed 's/^/    /'
}

say "command: $*; $rounds rounds, kill within ${within} s; logs in $logs"
failed=0
for round in $(seq "$rounds"); do
  delay=$((5 + RANDOM % (within - 4)))
  say "round $round: starting, killing it after ${delay} s"
  t0=$(date +%s)
  setsid "$@" >"$logs/killed-$round.log" 2>&1 &
  pid=$!
  ended=0
  for _ in $(seq "$delay"); do
    if ! kill -0 "$pid" 2>/dev/null; then ended=1; break; fi
    sleep 1
  done
  if [ "$ended" = 1 ]; then
    wait "$pid"
    say "round $round: the command ended by itself (exit $?) after $(($(date +%s) - t0)) s, before the kill; nothing killed"
  else
    # The whole session: the command and every child that did not start
    # a session of its own.
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    say "round $round: killed after $(($(date +%s) - t0)) s; last lines of its output:"
    tail -n 5 "$logs/killed-$round.log" | sed 's/^/    /'
  fi
  say "round $round: processes that may have outlived it:"
  survivors
  say "round $round: running the command again"
  t1=$(date +%s)
  "$@" >"$logs/rerun-$round.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ]; then
    say "round $round: rerun passed in $(($(date +%s) - t1)) s"
  else
    failed=1
    say "round $round: rerun FAILED (exit $rc) after $(($(date +%s) - t1)) s; last lines:"
    tail -n 30 "$logs/rerun-$round.log" | sed 's/^/    /'
  fi
done
say "processes left at the end:"
survivors
if [ "$failed" = 0 ]; then
  say "every rerun passed (logs in $logs)"
else
  say "a rerun failed (logs in $logs)"
fi
exit "$failed"
