#!/bin/bash
# Runs a benchmark in turns: in the checkout of the code before a change (BEFORE, e.g. a git
# worktree) and in this one, N times each, outputs in /tmp/bench/NAME-{before,after}-I.txt.
#   BEFORE=../before PYTHON=.venv/bin/python bench/turns.sh NAME N -- bench/x.py [args]
set -u
name=$1; n=$2; shift 3
python=$(realpath -s "${PYTHON:-$(command -v python3)}")  # -s: a venv's python is a symlink
before=$(realpath "${BEFORE:?set BEFORE to the checkout of the code before}")
after=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p /tmp/bench
for i in $(seq 1 "$n"); do
  for side in before after; do
    dir=$before; [ "$side" = after ] && dir=$after
    (cd "$dir" && PYTHONPATH=$dir "$python" "$@" > "/tmp/bench/$name-$side-$i.txt" 2>&1)
    echo "$name $side $i rc=$? $(date +%T)"
  done
done
