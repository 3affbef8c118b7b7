#!/bin/sh
# Slurm TaskProlog: every task of the job finds its node's daemon through JOADER_SOCKET (the
# Python client and every joader command read it). Slurm reads "export NAME=VALUE" lines.
# The socket lies in sock/, the job user's private folder inside the root-owned job folder that
# the prolog made (joader-prolog.sh says why).
echo "export JOADER_SOCKET=${JOADER_RUN_DIR:-/run/joader-slurm}/job-${SLURM_JOB_ID}/sock/joader.sock"
