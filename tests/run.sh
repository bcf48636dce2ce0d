#!/bin/sh
# Runs every test suite tests/t_*.sh, JOBS at a time (default 2: the suites are
# independent, each works in its own temporary directory). A suite prints one line per
# check:
#   PASS <name>            or            FAIL <name>: <why>
# and anything else it likes (ignored), except "NOTE ..." lines, which say what a suite
# deliberately does not check (shown here, counted nowhere). Results are reported per
# suite in name order, whatever order they finished in, with its wall and CPU seconds (its
# processes' user + system time: the machine is shared, so wall time says little alone);
# the last line is "N passed, N failed".
# TESTS="t_ops t_golden" limits the run to those suites.
cd "$(dirname "$0")/.." || exit 2
export KILN="${KILN:-$PWD/build/kiln}"
JOBS=${JOBS:-2}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
suites=$(echo ${TESTS:-$(cd tests && ls t_*.sh | sed "s/\.sh$//")})   # one line, space-separated

# The slowest suites start first, longest first (times of the last full run, docs/testing.md),
# so two workers finish close together; t_isa and t_llm (2-3 min) used to start mid-run.
slow="t_onnx t_isa t_metal t_compile t_ops t_llm t_coreml t_passes t_robust"
order=""
for s in $slow; do case " $suites " in *" $s "*) order="$order $s" ;; esac; done
for s in $suites; do case " $slow " in *" $s "*) ;; *) order="$order $s" ;; esac; done

# Each suite: its output, exit status and seconds into $log.
export log
printf '%s\n' $order | xargs -P "$JOBS" -I{} sh -c '
  start=$(date +%s)
  sh "tests/{}.sh" > "$log/{}.out" 2>&1
  echo $? > "$log/{}.rc"
  echo $(( $(date +%s) - start )) > "$log/{}.time"
  times > "$log/{}.times"'

pass=0; fail=0
for s in $suites; do
  rc=$(cat "$log/$s.rc" 2>/dev/null || echo 127)
  p=$(grep -c '^PASS ' "$log/$s.out")
  f=$(grep -c '^FAIL ' "$log/$s.out")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "FAIL $s: suite exited $rc without reporting a failure"; f=1
    tail -n 20 "$log/$s.out" | sed 's/^/    /'
  fi
  grep '^FAIL ' "$log/$s.out"
  grep '^NOTE ' "$log/$s.out"
  # times' second line: the suite's user and system time, as "1m2.34s 0m5.67s"
  cpu=$(awk 'NR == 2 { split($1 " " $2, t, /[ms]+/); printf "%d", t[1] * 60 + t[2] + t[3] * 60 + t[4] + 0.5 }' "$log/$s.times" 2>/dev/null)
  echo "  $s: $p passed, $f failed ($(cat "$log/$s.time" 2>/dev/null || echo ?)s, CPU ${cpu:-?}s)"
  pass=$((pass + p)); fail=$((fail + f))
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
