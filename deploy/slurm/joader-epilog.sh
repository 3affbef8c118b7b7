#!/bin/sh
# Slurm Epilog: stops the job's daemon on this node (SIGTERM: a clean stop that removes the socket
# and the shared-memory arena; SIGKILL after 20 s) and removes its directory.
set -u
RUN_DIR=${JOADER_RUN_DIR:-/run/joader-slurm}
: "${SLURM_JOB_ID:?the epilog runs under slurmd, which sets SLURM_JOB_ID}"
dir="$RUN_DIR/job-$SLURM_JOB_ID"
[ -d "$dir" ] || exit 0
if [ -f "$dir/joader.pid" ]; then
    pid=$(cat "$dir/joader.pid")
    kill -TERM "$pid" 2>/dev/null
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null
fi
rm -rf "$dir"
exit 0
