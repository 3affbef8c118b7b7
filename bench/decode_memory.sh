#!/bin/bash
# The daemon's memory while its loader threads decode very large images at once: COUNT copies of
# a real photo (matplotlib's grace_hopper.jpg) scaled to 12000×12000 and saved as PNG (30 MB of
# file, 432 MB of RGB once decoded) in a --crop 224 dataset, one epoch read by the test client.
# Prints the daemon's peak resident size (VmHWM), and its anonymous and shared-memory resident
# sizes after the epoch. Compare two builds (e.g. before and after a change) side by side.
#
#   bench/decode_memory.sh [BUILD_DIR [THREADS [COUNT]]]      (defaults: build 8 8)
set -euo pipefail
BUILD=$(realpath "${1:-build}"); THREADS=${2:-8}; COUNT=${3:-8}
WORK=$(mktemp -d /tmp/joader-decode-memory.XXXXXX)
trap 'kill $DAEMON 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/png/c0"
/usr/bin/python3 - "$WORK/png/c0" "$COUNT" <<'PY'
import os, sys
from PIL import Image
import matplotlib.cbook as cbook
folder, count = sys.argv[1], int(sys.argv[2])
photo = Image.open(cbook.get_sample_data('grace_hopper.jpg')).convert('RGB').resize((12000, 12000), Image.BILINEAR)
photo.save(os.path.join(folder, 'big0.png'), compress_level=6)
for i in range(1, count):  # the same bytes under other names: every one is read and decoded
    os.link(os.path.join(folder, 'big0.png'), os.path.join(folder, f'big{i}.png'))
PY
SOCK=$WORK/j.sock
"$BUILD/joader" serve --socket "$SOCK" --cache-size 256MiB --threads "$THREADS" --state none > "$WORK/serve.log" 2>&1 &
DAEMON=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
"$BUILD/joader" dataset add big --source "imagefolder:$WORK/png" --crop 224 --socket "$SOCK" > /dev/null
start=$(date +%s.%N)
"$BUILD/joader_test_client" --socket "$SOCK" --dataset big --batch "$COUNT" --epochs 1 > "$WORK/client.log"
end=$(date +%s.%N)
sleep 1
kb() { awk -v k="$1:" '$1 == k {print int($2 / 1024)}' "/proc/$DAEMON/status"; }
echo "build=$BUILD threads=$THREADS images=$COUNT seconds=$(echo "$end - $start" | bc)" \
     "peak_rss_MiB=$(kb VmHWM) after_anon_MiB=$(kb RssAnon) after_shmem_MiB=$(kb RssShmem)"
