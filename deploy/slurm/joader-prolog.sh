#!/bin/sh
# Slurm Prolog: one Joader daemon per node for each job, run as the job's user, so that the job's
# ranks on this node share the reading and decoding of their data. In slurm.conf:
#   Prolog=/etc/slurm/joader-prolog.sh
#   Epilog=/etc/slurm/joader-epilog.sh
#   TaskProlog=/etc/slurm/joader-taskprolog.sh     (sets JOADER_SOCKET in every task)
#   PrologFlags=Alloc                              (start it when the allocation is made)
# Settings (environment of slurmd, or edit here): JOADER (the binary), JOADER_CACHE_SIZE,
# JOADER_RUN_DIR (where each job's socket directory is made).
set -eu
JOADER=${JOADER:-/usr/local/bin/joader}
CACHE=${JOADER_CACHE_SIZE:-8GiB}
RUN_DIR=${JOADER_RUN_DIR:-/run/joader-slurm}
: "${SLURM_JOB_ID:?the prolog runs under slurmd, which sets SLURM_JOB_ID}"
: "${SLURM_JOB_UID:?}"
: "${SLURM_JOB_GID:=$(id -g "$SLURM_JOB_UID")}"
dir="$RUN_DIR/job-$SLURM_JOB_ID"
mkdir -p -m 0755 "$RUN_DIR"
mkdir -m 0700 "$dir"                       # private to the job's user: the daemon checks it
chown "$SLURM_JOB_UID:$SLURM_JOB_GID" "$dir"
# setsid: the daemon outlives the prolog, in a session of its own.
setsid setpriv --reuid="$SLURM_JOB_UID" --regid="$SLURM_JOB_GID" --clear-groups \
    "$JOADER" serve --socket "$dir/joader.sock" --cache-size "$CACHE" --state none \
    >"$dir/joader.log" 2>&1 </dev/null &
echo $! >"$dir/joader.pid"
# Ready when the socket answers (the job's first rank may start right away).
i=0
until "$JOADER" status --socket "$dir/joader.sock" >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt 300 ] || ! kill -0 "$(cat "$dir/joader.pid")" 2>/dev/null; then
        echo "joader-prolog: the daemon did not start:" >&2
        cat "$dir/joader.log" >&2
        exit 1
    fi
    sleep 0.1
done
