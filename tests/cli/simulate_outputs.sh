#!/usr/bin/env bash
# `joader simulate` outputs: the table, the --json fields of DESIGN §6, and a --trace line per
# delivery with the fields t, job, epoch, item, hit.
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
