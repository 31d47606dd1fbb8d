#!/usr/bin/env bash
# One-machine emulation of an 18-node GB200 NVL72 Slurm partition, with
# Debian's real slurmctld, slurmd and munge: 18 slurmd processes
# (slurmd -N gb200-NN) behind one slurmctld. Each node has its own network
# namespace with address 10.0.0.N/24 (a veth pair to the bridge
# $net-br, 10.0.0.254, in the root namespace); its slurmd runs inside it, so
# every job step on gb200-NN does too, and /etc/hosts maps gb200-NN to
# 10.0.0.N. srt-slurm's per-node ports (8180, 6100+32k, 7500+i, 2379, ...)
# thus work unchanged on every emulated node.
# No GRES: the cluster profile (configs/clusters/slurm-emu.yaml) supplies the
# 4 GPUs per node. Jobs take whole nodes and queue for them as on the rack.
#
#   scripts/slurm-emu.sh start    install the packages if missing, start the
#                                 daemons (a no-op if they already run) and
#                                 wait for 18 idle nodes
#   scripts/slurm-emu.sh stop     stop every process this emulation started
#                                 and remove its state directory
#   scripts/slurm-emu.sh status   exit 0 when the emulation answers
#   scripts/slurm-emu.sh owner    print who started the running emulation
#   scripts/slurm-emu.sh env      print `export SLURM_CONF=...` for eval
#
# A start finding no live slurmctld starts clean: whatever a killed run left
# (munged, a slurmd, job steps and their slurmstepd in the node namespaces,
# the controller's saved jobs, the nodes' spools) is ended and removed
# first, and slurmctld starts without recovering state (-c). A stop ends
# every process the emulation started, found by pid file, by its command
# line naming this directory, and in the node namespaces, so none outlives
# it. Processes are matched by this directory: another emulation's (another
# SWEEPFLOW_SLURM_EMU_DIR) are never touched.
#
# SWEEPFLOW_SLURM_EMU_OWNER, when set at start, is written to $dir/owner so a
# later caller knows who started the daemons (tests adopt and stop only an
# emulation a test started).
# Everything lives in $SWEEPFLOW_SLURM_EMU_DIR (default
# /tmp/sweepflow-slurm-emu): slurm.conf, a private munge key and socket, spool,
# logs and pid files. Clients find the emulation through SLURM_CONF, so a real
# /etc/slurm is never touched. Needs root (slurmd runs job steps as the user).
set -euo pipefail

dir="${SWEEPFLOW_SLURM_EMU_DIR:-/tmp/sweepflow-slurm-emu}"
nodes=18
partition="${SWEEPFLOW_SLURM_EMU_PARTITION:-gb200}"
ctld_port="${SWEEPFLOW_SLURM_EMU_CTLD_PORT:-17000}"
conf="$dir/slurm.conf"
export SLURM_CONF="$conf"
# Network: namespaces $net-gb200-NN, bridge $net-br, host-side veths $net-hN.
net="${SWEEPFLOW_SLURM_EMU_NET:-sfemu}"
bridge="$net-br"
bridge_addr=10.0.0.254
hosts_begin="# sweepflow-slurm-emu begin ($net)"
hosts_end="# sweepflow-slurm-emu end ($net)"

log() { echo "slurm-emu: $*" >&2; }

node_name() { printf 'gb200-%02d' "$1"; }
node_ns() { echo "$net-$(node_name "$1")"; }

install_packages() {
  local need=()
  for pkg in slurmctld slurmd slurm-client munge; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  command -v ip >/dev/null 2>&1 || need+=(iproute2)
  command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
  command -v iptables >/dev/null 2>&1 || need+=(iptables)
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    log "missing Debian packages: ${need[*]} (run as root to install them)"
    exit 1
  fi
  log "installing ${need[*]}"
  apt-get update -qq
  # policy-rc.d keeps Debian from starting the packaged services: this
  # script runs its own daemons on its own ports.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# running PID: the process exists and is not a zombie (a killed daemon whose
# parent never reaps it, as in a container without an init, stays listed).
running() {
  [ -d "/proc/$1" ] && ! grep -qs '^State:[[:space:]]*Z' "/proc/$1/status"
}

# alive PIDFILE NAME: the pid in the file runs and is NAME (not a reused pid).
alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && running "$pid" || return 1
  grep -q "$2" "/proc/$pid/comm" 2>/dev/null
}

write_conf() {
  local host
  host=$(hostname -s)
  cat >"$conf" <<EOF
# Written by scripts/slurm-emu.sh: an 18-node GB200 NVL72 partition on one machine.
ClusterName=sweepflow-emu
SlurmctldHost=$host($bridge_addr)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# A node set DOWN by an admin (or a test: scontrol update state=down) stays
# down until resumed, as on a production cluster; only a node that stopped
# responding comes back when its slurmd registers again. (With 2 the
# emulated slurmd, still running, re-registered the node within a second,
# and nothing could tell which node a NODE_FAIL job lost.)
ReturnToService=1
# Scheduling reacts within a second or two, and a cancelled job's
# processes get SIGKILL 2 s after SIGTERM, so tests and demos stay quick.
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_min_interval=100000
KillWait=2
MinJobAge=600
InactiveLimit=0
SlurmdTimeout=60
SlurmctldTimeout=60
# slurmd reports this host's CPUs; the configured shape wins.
SlurmdParameters=config_overrides
$(for i in $(seq "$nodes"); do echo "NodeName=$(node_name "$i") NodeHostname=$host NodeAddr=10.0.0.$i Port=$((17000 + i)) CPUs=1 State=UNKNOWN"; done)
PartitionName=$partition Nodes=gb200-[01-$(printf '%02d' $nodes)] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

# setup_net: the bridge, one namespace + veth pair per node, /etc/hosts.
# Idempotent: what exists is kept.
setup_net() {
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
    ip addr add "$bridge_addr/24" dev "$bridge"
  fi
  ip link set "$bridge" up
  local i ns
  for i in $(seq "$nodes"); do
    ns=$(node_ns "$i")
    if ! ip netns list | grep -qw "$ns"; then
      ip netns add "$ns"
    fi
    if ! ip link show "$net-h$i" >/dev/null 2>&1; then
      ip link add "$net-h$i" type veth peer name "$net-n$i"
      ip link set "$net-n$i" netns "$ns"
      ip -n "$ns" link set "$net-n$i" name eth0
      ip -n "$ns" addr add "10.0.0.$i/24" dev eth0
    fi
    ip link set "$net-h$i" master "$bridge"
    ip link set "$net-h$i" up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route replace default via "$bridge_addr"
  done
  # Node-to-node traffic crosses the bridge; with br_netfilter on (Docker
  # sets FORWARD to DROP) it must be let through explicitly.
  local ipt
  for ipt in iptables iptables-legacy; do
    command -v "$ipt" >/dev/null 2>&1 || continue
    "$ipt" -C FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null ||
      "$ipt" -I FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null || true
  done
  remove_hosts
  {
    echo "$hosts_begin"
    for i in $(seq "$nodes"); do echo "10.0.0.$i $(node_name "$i")"; done
    echo "$hosts_end"
  } >>/etc/hosts
}

# remove_hosts drops this emulation's block from /etc/hosts (in place: the
# file may be a bind mount).
remove_hosts() {
  grep -qF "$hosts_begin" /etc/hosts 2>/dev/null || return 0
  local kept
  kept=$(awk -v b="$hosts_begin" -v e="$hosts_end" '$0==b{skip=1;next} $0==e{skip=0;next} !skip' /etc/hosts)
  printf '%s\n' "$kept" >/etc/hosts
}

# teardown_net kills what still runs in the namespaces (job steps slurmd
# left behind), then removes namespaces, veths, bridge and hosts entries.
teardown_net() {
  local i ns pid
  for i in $(seq "$nodes"); do
    ns=$(node_ns "$i")
    ip netns list | grep -qw "$ns" || continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
    ip link del "$net-h$i" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  local ipt
  for ipt in iptables iptables-legacy; do
    command -v "$ipt" >/dev/null 2>&1 || continue
    while "$ipt" -D FORWARD -i "$bridge" -o "$bridge" -j ACCEPT 2>/dev/null; do :; done
  done
  remove_hosts
}

# ours: the pids of every process of this emulation that still runs: its
# daemons (their command lines name $dir), everything in its node
# namespaces (job steps, slurmstepd), and the srun clients of its job steps
# (their SLURM_CONF is this emulation's), which never end once it is gone.
ours() {
  local p cmd i ns
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    case "$(cat "/proc/$p/comm" 2>/dev/null)" in
      munged | slurmctld | slurmd | slurmstepd)
        { cmd=$(tr '\0' ' ' <"/proc/$p/cmdline"); } 2>/dev/null || continue
        case "$cmd" in *"$dir/"*) running "$p" && echo "$p" ;; esac
        ;;
      srun | salloc)
        { tr '\0' '\n' <"/proc/$p/environ" | grep -qxF "SLURM_CONF=$conf"; } 2>/dev/null && running "$p" && echo "$p"
        ;;
    esac
  done
  for i in $(seq "$nodes"); do
    ns=$(node_ns "$i")
    ip netns list 2>/dev/null | grep -qw "$ns" || continue
    for p in $(ip netns pids "$ns" 2>/dev/null); do
      if running "$p"; then echo "$p"; fi
    done
  done
  return 0
}

# end_ours ends what ours lists: SIGTERM, then SIGKILL after 5 s.
end_ours() {
  local pids p
  pids=$(ours | sort -u)
  [ -n "$pids" ] || return 0
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    pids=$(for p in $pids; do if running "$p"; then echo "$p"; fi; done)
    [ -n "$pids" ] || return 0
    sleep 0.1
  done
  for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
}

# clean_start: no slurmctld of this emulation runs, so nothing of it is in
# use: end what a killed run left and remove its state, keeping the logs of
# that run beside the new ones.
clean_start() {
  local left
  left=$(ours | sort -u | tr '\n' ' ')
  if [ -n "${left% }" ] || [ -d "$dir/ctld" ]; then
    log "no live slurmctld: starting clean (ending left-over processes: ${left:-none}; removing saved jobs and spools)"
  fi
  end_ours
  rm -rf "$dir/ctld" "$dir/spool" "$dir/run" "$dir/owner" "$dir/munge/munge.socket"*
  if [ -d "$dir/log" ]; then
    local old="$dir/log.$(date +%s)"
    mv "$dir/log" "$old" 2>/dev/null || true
    ls -dt "$dir"/log.* 2>/dev/null | tail -n +3 | xargs -r rm -rf
  fi
}

start_munge() {
  alive "$dir/run/munged.pid" munged && return 0
  mkdir -p "$dir/munge"
  chmod 700 "$dir/munge"
  if [ ! -s "$dir/munge/munge.key" ]; then
    head -c 1024 /dev/urandom >"$dir/munge/munge.key"
    chmod 600 "$dir/munge/munge.key"
  fi
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  for _ in $(seq 50); do
    [ -S "$dir/munge/munge.socket" ] && alive "$dir/run/munged.pid" munged && return 0
    sleep 0.1
  done
  log "munged did not start (see $dir/log/munged.log)"
  exit 1
}

# daemon PIDFILE COMM CMD...: run CMD in the foreground mode of the daemon,
# detached, and record its pid ourselves so stop kills exactly it.
daemon() {
  local pidfile=$1 comm=$2
  shift 2
  alive "$pidfile" "$comm" && return 0
  setsid "$@" </dev/null >>"$dir/log/$(basename "$pidfile" .pid).out" 2>&1 &
  echo $! >"$pidfile"
}

# ready: every node answers (idle, or busy with jobs of an earlier caller).
ready() {
  local up
  up=$(sinfo -h -p "$partition" -t idle,alloc,mix,comp -o '%D' 2>/dev/null | awk '{s+=$1} END {print s+0}')
  [ "$up" -ge "$nodes" ]
}

start() {
  install_packages
  if [ "$(id -u)" != 0 ]; then
    log "must run as root: slurmd starts job steps as the submitting user"
    exit 1
  fi
  if ! setup_net; then
    log "could not set up the per-node network namespaces (needs root and iproute2 with netns support)"
    exit 1
  fi
  if alive "$dir/run/slurmctld.pid" slurmctld && ready; then
    log "already running ($conf), started by $(owner)"
    return 0
  fi
  local fresh=0
  if ! alive "$dir/run/slurmctld.pid" slurmctld; then
    clean_start
    fresh=1
  fi
  mkdir -p "$dir/run" "$dir/log" "$dir/ctld"
  for i in $(seq "$nodes"); do mkdir -p "$dir/spool/$(node_name "$i")"; done
  write_conf
  start_munge
  # -c: a clean start recovers no jobs of an earlier run of this directory
  # (-i only ignores errors reading them).
  if [ "$fresh" = 1 ]; then
    daemon "$dir/run/slurmctld.pid" slurmctld slurmctld -D -c -f "$conf"
  else
    daemon "$dir/run/slurmctld.pid" slurmctld slurmctld -D -i -f "$conf"
  fi
  for i in $(seq "$nodes"); do
    local n
    n=$(node_name "$i")
    # nsenter joins only the node's network namespace (ip netns exec would
    # also remount /sys and hide the cgroup mounts slurmd needs) and execs
    # slurmd: the recorded pid is slurmd's.
    daemon "$dir/run/slurmd-$n.pid" slurmd nsenter --net="/run/netns/$(node_ns "$i")" slurmd -D -N "$n" -f "$conf"
  done
  for _ in $(seq 300); do
    if ready; then
      [ -n "${SWEEPFLOW_SLURM_EMU_OWNER:-}" ] && echo "$SWEEPFLOW_SLURM_EMU_OWNER" >"$dir/owner"
      log "up: $nodes nodes in partition $partition (SLURM_CONF=$conf)"
      return 0
    fi
    sleep 0.2
  done
  log "the partition did not come up within 60 s; logs in $dir/log:"
  tail -n 20 "$dir/log/slurmctld.log" >&2 || true
  sinfo >&2 || true
  exit 1
}

# owner: who started the running emulation (SWEEPFLOW_SLURM_EMU_OWNER at
# its start, with the directory's owner when none was given).
owner() {
  local who
  who=$(cat "$dir/owner" 2>/dev/null || true)
  [ -n "$who" ] || who="an unnamed caller ($(stat -c %U "$dir" 2>/dev/null || echo unknown))"
  echo "$who"
}

stop() {
  [ -d "$dir" ] || { end_ours; teardown_net; return 0; }
  local f pids=()
  # Jobs first, so slurmd kills their processes while it still runs.
  if [ -f "$conf" ] && alive "$dir/run/slurmctld.pid" slurmctld; then
    scancel --partition "$partition" >/dev/null 2>&1 || true
    for _ in $(seq 50); do
      [ -z "$(squeue -h -p "$partition" -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for f in "$dir"/run/slurmd-*.pid "$dir/run/slurmctld.pid" "$dir/run/munged.pid"; do
    [ -f "$f" ] || continue
    local comm
    case "$(basename "$f")" in
      slurmd-*) comm=slurmd ;;
      slurmctld.pid) comm=slurmctld ;;
      munged.pid) comm=munged ;;
    esac
    if alive "$f" "$comm"; then
      local pid
      pid=$(cat "$f")
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 100); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
  done
  # What the pid files missed: a munged or slurmd whose pid file is gone,
  # job steps and their slurmstepd in the node namespaces.
  end_ours
  teardown_net
  rm -rf "$dir"
  log "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) alive "$dir/run/slurmctld.pid" slurmctld && ready ;;
  owner) owner ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *)
    echo "usage: $0 start|stop|status|owner|env" >&2
    exit 2
    ;;
esac
