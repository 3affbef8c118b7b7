#!/bin/sh
# Slurm TaskProlog: every task of the job finds its node's daemon through JOADER_SOCKET (the
# Python client and every joader command read it). Slurm reads "export NAME=VALUE" lines.
echo "export JOADER_SOCKET=${JOADER_RUN_DIR:-/run/joader-slurm}/job-${SLURM_JOB_ID}/joader.sock"
