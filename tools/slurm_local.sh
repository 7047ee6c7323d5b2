#!/usr/bin/env bash
# A single-node Slurm on this machine (Debian's slurm-wlm: munged, slurmctld and slurmd on localhost), for the
# Slurm end-to-end test (tests/test_slurm.py) and for trying `autograder slurm ...` without a cluster.
#
#   bash tools/slurm_local.sh start     # install if missing (apt-get, as root or with sudo), configure, start
#   bash tools/slurm_local.sh status    # exit 0 when the node is up and idle/mixed/allocated
#   bash tools/slurm_local.sh stop      # stop the daemons this script started
#   bash tools/slurm_local.sh env       # print `export SLURM_CONF=...` for the client commands
#
# Idempotent: `start` on a running node only checks it. Everything lives under $COURSE_SLURM_DIR (default
# /tmp/course-slurm): slurm.conf, state, logs, pid files; the machine's own /etc/slurm is never written, so the
# client commands need SLURM_CONF=$COURSE_SLURM_DIR/slurm.conf (what `env` prints and the test sets).
#
# Single node, no database: accounting storage is off (no slurmdbd/MySQL to install), and job completion records go
# to a text file (JobCompType=jobcomp/filetxt), which `sacct --completion` reads: the state of a finished,
# failed, timed-out or cancelled task comes from Slurm itself. Processes are tracked without cgroups
# (proctrack/linuxproc, task/none), so it runs in a container as well.
set -euo pipefail

DIR=${COURSE_SLURM_DIR:-/tmp/course-slurm}
CONF=$DIR/slurm.conf
export SLURM_CONF=$CONF
PARTITION=${COURSE_SLURM_PARTITION:-course}

say() { echo "slurm_local.sh: $*" >&2; }

sudo_cmd() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
  else return 1; fi
}

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
     && command -v sbatch >/dev/null; then
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    say "Slurm is not installed and there is no apt-get here: install slurm-wlm and munge by hand"; return 1
  fi
  if [[ $(id -u) -ne 0 ]] && ! sudo -n true 2>/dev/null; then
    say "Slurm is not installed and this user cannot run apt-get (no root, no sudo)"; return 1
  fi
  say "installing slurm-wlm and munge with apt-get (once)"
  local log; log=$(mktemp)
  if ! { DEBIAN_FRONTEND=noninteractive sudo_cmd apt-get update -qq && \
         DEBIAN_FRONTEND=noninteractive sudo_cmd apt-get install -y -qq --no-install-recommends slurm-wlm munge; } \
       >"$log" 2>&1; then
    tail -n 30 "$log" >&2; rm -f "$log"; say "apt-get failed (log above)"; return 1
  fi
  rm -f "$log"
}

pid_alive() { local p; p=$(cat "$1" 2>/dev/null) && [[ -n $p ]] && kill -0 "$p" 2>/dev/null; }

node_ok() {
  local st
  st=$(sinfo -h -N -p "$PARTITION" -o '%t' 2>/dev/null | head -n1) || return 1
  [[ $st == idle* || $st == mix* || $st == alloc* || $st == comp* ]]
}

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then return 0; fi
  if [[ ! -s /etc/munge/munge.key ]]; then
    sudo_cmd /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
      || sudo_cmd dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
  sudo_cmd mkdir -p /run/munge /var/lib/munge /var/log/munge
  if id munge >/dev/null 2>&1; then
    sudo_cmd chown munge:munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
    sudo_cmd chmod 0400 /etc/munge/munge.key
    sudo_cmd chmod 0755 /run/munge
    sudo_cmd runuser -u munge -- /usr/sbin/munged
  else
    sudo_cmd /usr/sbin/munged --force
  fi
  for _ in $(seq 50); do
    munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  say "munged did not start"; return 1
}

write_conf() {
  local host node
  host=$(hostname -s)
  # What slurmd finds on this machine (CPUs, sockets, memory), so that the node is never drained for a mismatch.
  node=$(slurmd -C 2>/dev/null | head -n1)
  [[ $node == NodeName=* ]] || node="NodeName=$host CPUs=$(nproc)"
  mkdir -p "$DIR/ctld" "$DIR/d" "$DIR/log"
  cat >"$CONF.new" <<EOF
# written by tools/slurm_local.sh: a single-node Slurm for the course's tests
ClusterName=course
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/d
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=${COURSE_SLURMCTLD_PORT:-6817}
SlurmdPort=${COURSE_SLURMD_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerParameters=sched_interval=2
MessageTimeout=30
SlurmdTimeout=300
InactiveLimit=0
KillWait=5
MinJobAge=3600
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
  mv "$CONF.new" "$CONF"
}

start() {
  install
  if pid_alive "$DIR/slurmctld.pid" && pid_alive "$DIR/slurmd.pid" && node_ok; then
    say "already running (SLURM_CONF=$CONF)"; return 0
  fi
  start_munge
  write_conf
  pid_alive "$DIR/slurmctld.pid" || sudo_cmd slurmctld -f "$CONF"
  pid_alive "$DIR/slurmd.pid" || sudo_cmd slurmd -f "$CONF"
  for _ in $(seq 120); do
    if node_ok; then say "up: partition $PARTITION on $(hostname -s), SLURM_CONF=$CONF"; return 0; fi
    # a node left DOWN or DRAINED by an earlier run is resumed once the daemons answer
    scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
    sleep 0.5
  done
  say "the node did not come up; sinfo says: $(sinfo -N 2>&1 | tail -n +2)"
  tail -n 15 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 2>/dev/null || true
  return 1
}

stop() {
  local f
  for f in slurmd slurmctld; do
    if pid_alive "$DIR/$f.pid"; then sudo_cmd kill "$(cat "$DIR/$f.pid")" || true; fi
  done
  for _ in $(seq 50); do
    pid_alive "$DIR/slurmd.pid" || pid_alive "$DIR/slurmctld.pid" || break
    sleep 0.1
  done
  say "stopped (munged left running: other software may use it)"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  # daemons of this folder first: with none running, sinfo would wait MessageTimeout (30 s) for a slurmctld
  status) pid_alive "$DIR/slurmctld.pid" && pid_alive "$DIR/slurmd.pid" && node_ok ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
