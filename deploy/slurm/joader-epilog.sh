#!/bin/sh
# Slurm Epilog: stops the job's daemon on this node (SIGTERM: a clean stop that removes the socket
# and the shared-memory arena; SIGKILL after 20 s) and removes its directory.
#
# This runs as root and signals only a PID it can trust: the one the prolog wrote in
# $RUN_DIR/job-ID/joader.pid, a folder only root may write (nothing in the user's sock/ is read),
# and only while that process still is the job's daemon: all its uids are SLURM_JOB_UID and its
# command line serves this job's socket. The signal itself is sent as the job's user, so even a
# PID reused in between can only reach a process that user could signal anyway.
set -u
RUN_DIR=${JOADER_RUN_DIR:-/run/joader-slurm}
: "${SLURM_JOB_ID:?the epilog runs under slurmd, which sets SLURM_JOB_ID}"
: "${SLURM_JOB_UID:?}"
: "${SLURM_JOB_GID:=$(id -g "$SLURM_JOB_UID")}"
fail() { echo "joader-epilog: $*" >&2; exit 1; }
digits() { case "$2" in '' | *[!0-9]*) fail "$1 must be a number, not '$2'";; esac; }
digits SLURM_JOB_ID "$SLURM_JOB_ID"
digits SLURM_JOB_UID "$SLURM_JOB_UID"
digits SLURM_JOB_GID "$SLURM_JOB_GID"
[ -d "$RUN_DIR" ] || exit 0
# The prolog's checks again: a RUN_DIR that is a symlink, or not root's alone, may be another
# user's, and nothing in it is touched (no rm -rf through a link a user planted).
[ ! -L "$RUN_DIR" ] || fail "$RUN_DIR is a symlink: nothing removed"
RUN_DIR=$(readlink -f "$RUN_DIR")   # as the prolog did: the daemon's --socket names this path
[ -n "$(find "$RUN_DIR" -maxdepth 0 -type d -user 0 ! -perm /022)" ] ||
    fail "$RUN_DIR is not a directory of root's that only root may write: nothing removed"
dir="$RUN_DIR/job-$SLURM_JOB_ID"
[ -e "$dir" ] || [ -L "$dir" ] || exit 0           # no daemon was started for this job here
# The prolog makes it root's, 0755. Anything else (a folder of the older recipe, owned by the job's
# user, or something planted) is not read: only removed, which follows no link (rm -rf of a symlink
# removes the link). A daemon it may have held is left running, as the job's user.
if [ -L "$dir" ] || [ -z "$(find "$dir" -maxdepth 0 -type d -user 0 ! -perm /022)" ]; then
    echo "joader-epilog: $dir is not a directory of root's that only root may write: removed, nothing in it read" >&2
    rm -rf "$dir"
    exit 0
fi
sock="$dir/sock/joader.sock"

# True while PID is the job's daemon: real, effective, saved and filesystem uids all the job's,
# and "--socket $sock" among its arguments (a zombie's command line is empty).
is_daemon() {
    [ -r "/proc/$1/status" ] || return 1
    [ "$(awk '$1 == "Uid:" { print $2, $3, $4, $5 }' "/proc/$1/status" 2>/dev/null)" = \
      "$SLURM_JOB_UID $SLURM_JOB_UID $SLURM_JOB_UID $SLURM_JOB_UID" ] || return 1
    tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -Fxq -e "--socket" &&
        tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | grep -Fxq -e "$sock"
}
signal_as_user() {
    setpriv --reuid="$SLURM_JOB_UID" --regid="$SLURM_JOB_GID" --clear-groups \
        sh -c 'kill -"$1" "$2"' sh "$1" "$2" 2>/dev/null
}

pid=
if [ -f "$dir/joader.pid" ] && [ ! -L "$dir/joader.pid" ]; then
    pid=$(head -c 32 "$dir/joader.pid")
fi
case "$pid" in
    '' | *[!0-9]* | 0) ;;                              # no number (-1 would mean every process)
    *)
        if is_daemon "$pid"; then
            signal_as_user TERM "$pid"
            i=0
            while is_daemon "$pid" && [ "$i" -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
            if is_daemon "$pid"; then signal_as_user KILL "$pid"; fi
        fi
        ;;
esac
# rm does not follow symlinks: whatever the user left in sock/ is removed, never its targets.
rm -rf "$dir"
exit 0
