#!/bin/sh
# Slurm Prolog: one Joader daemon per node for each job, run as the job's user, so that the job's
# ranks on this node share the reading and decoding of their data. In slurm.conf:
#   Prolog=/etc/slurm/joader-prolog.sh
#   Epilog=/etc/slurm/joader-epilog.sh
#   TaskProlog=/etc/slurm/joader-taskprolog.sh     (sets JOADER_SOCKET in every task)
#   PrologFlags=Alloc                              (start it when the allocation is made)
# Settings (environment of slurmd, or edit here): JOADER (the binary), JOADER_CACHE_SIZE,
# JOADER_RUN_DIR (where each job's directory is made; a root-owned directory that only root may
# write, and so every directory above it, unless sticky like /tmp).
#
# This runs as root, and the job's user must not be able to steer what root writes or signals:
#   $RUN_DIR/job-ID/              root:root 0755, made here (refused if it exists): root's files
#       joader.pid                root:root 0644, the daemon's PID, which the epilog trusts
#       joader.log                the daemon's output, owned by the job's user, 0600
#       sock/                     the job's user, 0700: the daemon's socket (the daemon and its
#           joader.sock           clients require a directory of the user's that no one else may write)
# Nothing root opens by name lies in a directory the user can write, so links the user plants
# there (in sock/) are never followed by root; the epilog removes the tree with rm -rf, which
# does not follow them either.
set -eu
umask 022
JOADER=${JOADER:-/usr/local/bin/joader}
CACHE=${JOADER_CACHE_SIZE:-8GiB}
RUN_DIR=${JOADER_RUN_DIR:-/run/joader-slurm}
: "${SLURM_JOB_ID:?the prolog runs under slurmd, which sets SLURM_JOB_ID}"
: "${SLURM_JOB_UID:?}"
: "${SLURM_JOB_GID:=$(id -g "$SLURM_JOB_UID")}"
fail() { echo "joader-prolog: $*" >&2; exit 1; }
# They become paths and setpriv's arguments: digits only, each (an `id -g` that failed leaves the
# gid empty, and `set -e` does not see a failure inside ${...:=...}).
digits() { case "$2" in '' | *[!0-9]*) fail "$1 must be a number, not '$2'";; esac; }
digits SLURM_JOB_ID "$SLURM_JOB_ID"
digits SLURM_JOB_UID "$SLURM_JOB_UID"
digits SLURM_JOB_GID "$SLURM_JOB_GID"
case "$RUN_DIR" in /*) ;; *) fail "JOADER_RUN_DIR must be an absolute path, not '$RUN_DIR'";; esac

# No directory above RUN_DIR may let another user rename or replace what is in it (writable by
# others and not sticky), checked before root makes anything there; then RUN_DIR must be a real
# directory (not a symlink) of root's that group and others cannot write. Else a user could swap
# in a folder of their own between these checks and the writes.
up=$(dirname "$RUN_DIR")
[ -d "$up" ] || fail "$up does not exist (the prolog makes $RUN_DIR, not the folders above it)"
up=$(readlink -f "$up")   # symlinks above it (e.g. /var/run) resolved, then checked
while :; do
    [ -n "$(find "$up" -maxdepth 0 -type d -user 0 \( ! -perm /022 -o -perm -1000 \))" ] ||
        fail "$up (above $RUN_DIR) must be owned by root and not writable by others unless sticky"
    [ "$up" != / ] || break
    up=$(dirname "$up")
done
[ -e "$RUN_DIR" ] || [ -L "$RUN_DIR" ] || mkdir -m 0755 "$RUN_DIR"
[ ! -L "$RUN_DIR" ] || fail "$RUN_DIR is a symlink"
RUN_DIR=$(readlink -f "$RUN_DIR")
[ -n "$(find "$RUN_DIR" -maxdepth 0 -type d -user 0 ! -perm /022)" ] ||
    fail "$RUN_DIR must be a directory owned by root that group and others cannot write"

dir="$RUN_DIR/job-$SLURM_JOB_ID"
# Plain mkdir fails if anything (folder, file, symlink) is already there: a leftover is never reused.
mkdir -m 0755 "$dir" || fail "$dir already exists (an epilog that did not run?): not reusing it"
chown 0:0 "$dir"
mkdir -m 0700 "$dir/sock"
chown "$SLURM_JOB_UID:$SLURM_JOB_GID" "$dir/sock"
# The log: root creates it here, in its own folder, then gives it to the job's user, 0600 (the
# daemon's output names datasets and paths: 0644 would show them to every user of a shared node,
# 0640 to the job's primary group, often shared on clusters). The user may write it (as the daemon
# can) but cannot replace the name, so root's later reads and writes reach this file only.
(umask 077 && : >"$dir/joader.log")
chown "$SLURM_JOB_UID:$SLURM_JOB_GID" "$dir/joader.log"
sock="$dir/sock/joader.sock"
as_user() { setpriv --reuid="$SLURM_JOB_UID" --regid="$SLURM_JOB_GID" --clear-groups "$@"; }
# setsid: the daemon outlives the prolog, in a session of its own.
setsid setpriv --reuid="$SLURM_JOB_UID" --regid="$SLURM_JOB_GID" --clear-groups \
    "$JOADER" serve --socket "$sock" --cache-size "$CACHE" --state none \
    >>"$dir/joader.log" 2>&1 </dev/null &
daemon=$!
echo "$daemon" >"$dir/joader.pid"
# Ready when the socket answers (the job's first rank may start right away). Asked as the job's
# user: root need not talk to a socket the user controls.
i=0
until as_user "$JOADER" status --socket "$sock" >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt 300 ] || ! kill -0 "$daemon" 2>/dev/null; then
        # Signalled as the job's user: should the PID have been reused meanwhile, it can only
        # reach a process of that user's.
        as_user sh -c 'kill -TERM "$1"' sh "$daemon" 2>/dev/null || true
        echo "joader-prolog: the daemon did not start:" >&2
        cat "$dir/joader.log" >&2
        exit 1
    fi
    sleep 0.1
done
