#!/usr/bin/env bash
# `joader simulate` outputs: the table, the --json fields of DESIGN §6, and a --trace line per
# delivery with the fields t, job, epoch, item, hit; with a disk tier, decodes and disk reads.
set -eu
joader=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/s.json" <<'JSON'
{"universe": 100, "cache_items": 10, "epochs": 2, "seed": 3,
 "jobs": [{"name": "a", "subset": {"all": true}}, {"name": "b \"quoted\"", "subset": {"range": [0, 50]}, "start": 5, "speed": 0.5}]}
JSON
"$joader" simulate --scenario "$dir/s.json" > "$dir/table"
grep -q 'L/D' "$dir/table"
"$joader" simulate --scenario "$dir/s.json" --json --trace "$dir/trace.jsonl" > "$dir/out.json"
/usr/bin/python3 - "$dir/out.json" "$dir/trace.jsonl" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
for key in ("loads", "deliveries", "ld_ratio", "jobs"):
    assert key in out, key
assert out["deliveries"] == 300, out
assert abs(out["ld_ratio"] - out["loads"] / out["deliveries"]) < 1e-12
assert [j["name"] for j in out["jobs"]] == ["a", 'b "quoted"']
assert [j["epochs"] for j in out["jobs"]] == [2, 2]
events = [json.loads(line) for line in open(sys.argv[2])]
assert len(events) == out["deliveries"]
assert set(events[0]) == {"t", "job", "epoch", "item", "hit"}, events[0]
for job, n in (("a", 100), ('b "quoted"', 50)):
    for epoch in (0, 1):
        items = sorted(e["item"] for e in events if e["job"] == job and e["epoch"] == epoch)
        assert items == list(range(n)), (job, epoch)
assert sum(not e["hit"] for e in events) >= out["loads"]
print("1 passed, 0 failed")
PY
# With a disk tier: decodes and disk reads apart, in the table and the JSON.
cat > "$dir/d.json" <<'JSON'
{"universe": 100, "cache_items": 10, "epochs": 3, "load_ms": 2, "disk": {"read_ms": 0.5},
 "jobs": [{"subset": {"all": true}}]}
JSON
"$joader" simulate --scenario "$dir/d.json" | grep -q 'disk tier: decodes 100  disk reads '
"$joader" simulate --scenario "$dir/d.json" --json | /usr/bin/python3 -c '
import json, sys
out = json.load(sys.stdin)
assert out["decodes"] == 100 and out["disk_reads"] == out["loads"] - 100 > 0, out
assert abs(out["decodes_per_delivery"] - 100 / 300) < 1e-12, out
print("1 passed, 0 failed")'
"$joader" simulate --scenario "$dir/s.json" --json | /usr/bin/python3 -c '
import json, sys
out = json.load(sys.stdin)
assert out["decodes"] == out["loads"] and out["disk_reads"] == 0, out'
if "$joader" simulate --scenario "$dir/s.json" | grep -q "disk tier"; then
  echo "a table without a disk tier shows one" >&2
  exit 1
fi
