#!/bin/sh
# Runs every test suite tests/t_*.sh in name order. A suite prints one line per check:
#   PASS <name>            or            FAIL <name>: <why>
# and anything else it likes (ignored), except "NOTE ..." lines, which say what a suite
# deliberately does not check (shown here, counted nowhere). The last line is
# "N passed, N failed".
# TESTS="t_ops t_golden" limits the run to those suites.
cd "$(dirname "$0")/.." || exit 2
export KILN="${KILN:-$PWD/build/kiln}"
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
pass=0; fail=0
suites=${TESTS:-$(cd tests && ls t_*.sh | sed 's/\.sh$//')}
for s in $suites; do
  start=$(date +%s)
  sh "tests/$s.sh" > "$log/$s.out" 2>&1
  rc=$?
  p=$(grep -c '^PASS ' "$log/$s.out")
  f=$(grep -c '^FAIL ' "$log/$s.out")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $s: suite exited $rc without reporting a failure"; f=1
    tail -n 20 "$log/$s.out" | sed 's/^/    /'
  fi
  grep '^FAIL ' "$log/$s.out"
  grep '^NOTE ' "$log/$s.out"
  echo "  $s: $p passed, $f failed ($(( $(date +%s) - start ))s)"
  pass=$((pass + p)); fail=$((fail + f))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
