#!/bin/sh
# run.sh — runs scripts/lint.py, every test suite given and tests/test_*.py; prints a
# closing "suites: N passed, N failed" line and exits 1 if any failed.
set -u
pass=0; fail=0; failed=""
run() {
    name=$1; shift
    echo "=== $name"
    if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $name"; fi
}
run lint /usr/bin/python3 scripts/lint.py
for t in "$@"; do run "$(basename "$t")" "$t"; done
for t in tests/test_*.py; do [ -e "$t" ] && run "$(basename "$t")" /usr/bin/python3 "$t"; done
[ -n "$failed" ] && echo "failed:$failed"
echo "suites: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
