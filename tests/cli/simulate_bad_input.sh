#!/usr/bin/env bash
# `joader simulate` on bad input: each case must exit with status 2 (not a crash, not 0) and print
# exactly one line on stderr, starting with "error:" and containing the expected words.
set -u
joader=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failures=0
passed=0

check() {  # name, expected substring, scenario text (or @missing for a missing file)
  local name=$1 want=$2 text=$3 file="$dir/$1.json"
  if [ "$text" != "@missing" ]; then printf '%s' "$text" > "$file"; fi
  "$joader" simulate --scenario "$file" > "$dir/out" 2> "$dir/err"
  local rc=$?
  local lines
  lines=$(wc -l < "$dir/err")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q '^error: ' "$dir/err" || ! grep -qF -- "$want" "$dir/err"; then
    echo "FAIL $name: exit $rc, stderr:"; cat "$dir/err"
    failures=$((failures + 1))
  else
    passed=$((passed + 1))
  fi
}

ok_jobs='"jobs": [{"subset": {"all": true}}]'
check malformed_json   'malformed JSON'                   '{"universe": 10,'
check not_an_object    'expected a JSON object'           '[1, 2]'
check huge_number      'malformed JSON'                   '{"universe": 1e999, "jobs": []}'
check missing_file     'cannot read scenario file'        '@missing'
check unknown_sampler  "unknown sampler 'random'"         "{\"universe\": 10, \"sampler\": \"random\", $ok_jobs}"
check unknown_policy   "unknown policy 'mru'"             "{\"universe\": 10, \"policy\": \"mru\", $ok_jobs}"
check id_outside       'outside the universe'             '{"universe": 10, "jobs": [{"subset": {"ids": [3, 12]}}]}'
check range_outside    'outside the universe'             '{"universe": 10, "jobs": [{"subset": {"range": [0, 11]}}]}'
check empty_subset     'empty subset'                     '{"universe": 10, "jobs": [{"subset": {"ids": []}}]}'
check empty_range      'empty subset'                     '{"universe": 10, "jobs": [{"subset": {"range": [5, 5]}}]}'
check zero_speed       'must be a positive number'        '{"universe": 10, "jobs": [{"subset": {"all": true}, "speed": 0}]}'
check negative_speed   'must be a positive number'        '{"universe": 10, "jobs": [{"subset": {"all": true}, "speed": -1}]}'
check string_speed     'expected a number'                '{"universe": 10, "jobs": [{"subset": {"all": true}, "speed": "fast"}]}'
check no_jobs          'non-empty array of jobs'          '{"universe": 10, "jobs": []}'
check zero_universe    'must be at least 1'               "{\"universe\": 0, $ok_jobs}"
check huge_universe    'must be at most'                  "{\"universe\": 99999999999, $ok_jobs}"
many=$(for i in $(seq 0 64); do printf '{"subset": {"all": true}},'; done)
check too_many_jobs    'too many jobs: at most 64'        "{\"universe\": 10, \"jobs\": [${many%,}]}"

# A CLI override goes through the same validation.
printf '{"universe": 10, %s}' "$ok_jobs" > "$dir/good.json"
"$joader" simulate --scenario "$dir/good.json" --policy nope > /dev/null 2> "$dir/err"
if [ $? -ne 2 ] || ! grep -q "unknown policy 'nope'" "$dir/err"; then echo "FAIL override_policy"; failures=$((failures + 1)); else passed=$((passed + 1)); fi

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ]
