#!/bin/sh
# t_golden.sh — the exact generated code of small models, tests/golden/*.lua (tiny.lua;
# tinystate.lua: entries and state; tinyq.lua: stored weight formats, built with the
# options in tinyq.args; tinyconv.lua: a Winograd convolution with a fused BatchNorm and
# residual, and a strided one over the padded grid): `kiln build tests/golden/tiny.lua` must write tiny.h, tiny.c and
# tiny.json byte for byte equal to tests/golden/expected/. A change to the emitter shows up here as a diff to review.
# `kiln build --profile` of tiny.lua and tinystate.lua (entries) must differ from the plain
# build by exactly tests/golden/expected/<m>_profile.diff (what the profile adds, as a diff).
#
# To accept new output after reading it (it must look like careful hand-written code:
# names from the model, Lua file:line comments, named constants):
#   UPDATE_GOLDEN=1 sh tests/t_golden.sh      then review `git diff tests/golden/expected`
# The build runs from the repository root with a relative script path, as the comments
# in the expected files record "tests/golden/tiny.lua:LINE".
. "$(dirname "$0")/lib.sh"
kt_need_kiln golden
kt_work golden
exp=tests/golden/expected

# golden F GOT: the file GOT against $exp/F (or, with UPDATE_GOLDEN, copied there).
golden() {
  if [ ! -f "$2" ]; then
    echo "FAIL golden/$1: kiln build wrote no $1"
  elif [ -n "$UPDATE_GOLDEN" ]; then
    mkdir -p "$exp" && cp "$2" "$exp/$1" && echo "PASS golden/$1 (updated $exp/$1: review the diff)"
  elif [ ! -f "$exp/$1" ]; then
    echo "FAIL golden/$1: no expected file $exp/$1 (UPDATE_GOLDEN=1 sh tests/t_golden.sh writes it)"
  elif cmp -s "$exp/$1" "$2"; then
    echo "PASS golden/$1"
  else
    echo "FAIL golden/$1: differs from $exp/$1 (first lines of the diff below; UPDATE_GOLDEN=1 to accept)"
    diff -u "$exp/$1" "$2" | head -n 30 | sed 's/^/    /'
  fi
}

for script in tests/golden/*.lua; do
  m=$(basename "$script" .lua)
  args=""
  [ -f "${script%.lua}.args" ] && args=$(cat "${script%.lua}.args")
  # shellcheck disable=SC2086
  if ! err=$("$KILN" build "$script" -o "$WORK/$m" $args 2>&1); then
    echo "FAIL golden/$m: kiln build $script failed: $(echo "$err" | head -n 3 | tr '\n' ' ')"
    continue
  fi
  for f in "$m.h" "$m.c" "$m.json"; do golden "$f" "$WORK/$m/$f"; done
done

# The profile: what --profile adds to tiny.h/.c and tinystate.h/.c, as a unified diff.
for m in tiny tinystate; do
  f=${m}_profile.diff
  if ! err=$("$KILN" build "tests/golden/$m.lua" -o "$WORK/${m}_profile" --profile 2>&1); then
    echo "FAIL golden/$f: kiln build --profile failed: $(echo "$err" | head -n 3 | tr '\n' ' ')"
    continue
  fi
  for x in h c; do
    diff -U 2 --label "a/$m.$x" --label "b/$m.$x" "$WORK/$m/$m.$x" "$WORK/${m}_profile/$m.$x"
  done > "$WORK/$f"
  golden "$f" "$WORK/$f"
done
