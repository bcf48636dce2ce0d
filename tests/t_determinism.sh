#!/bin/sh
# t_determinism.sh — everything Kiln writes is byte-identical from run to run and across
# directories: for every model (models/*.lua, tests/golden/*.lua, tests/targets/*.lua) it builds
#   a  from the repository root:         kiln build models/m.lua -o W/a/m
#   a2 the same command again:           run-to-run equality
#   b  from a copy of the model's directory elsewhere, the same relative script path,
#      into a deeper output directory:   kiln build models/m.lua -o W/b/x/y/m
#   c  from the model's own directory:   kiln build m.lua -o W/c/m
#   d  from /, with an absolute path:    kiln build /abs/models/m.lua -o W/d/m
# and requires a = a2 = b = c = d: generated files name sources relative to the script's
# own directory, so neither the working directory nor an absolute path changes a byte.
# Then it searches every output for absolute paths, the output and build directory names,
# the host name, and timestamps.
# Targets: --target all when that works (it is tried first and its failure reported),
# else c; always with --embed-weights, so <m>_weights.c is compared too. A model with
# state or entry points is built for C, Metal and CoreML at --min-os iOS18 (Core ML
# states and multifunction models need it). Last, two --profile builds (the table holds Lua
# lines): from the root and from / with an absolute path, the same bytes and no paths.
. "$(dirname "$0")/lib.sh"
kt_need_kiln determinism
kt_work det

targets="--target all --embed-weights"
probe=$(kt_models | head -n 1)
if ! err=$("$KILN" build "$probe" $targets -o "$WORK/probe" 2>&1); then
  echo "FAIL determinism/target_all: kiln build $probe --target all fails, checking --target c only: $(echo "$err" | head -n 2 | tr '\n' ' ')"
  targets="--target c --embed-weights"
else
  echo "PASS determinism/target_all"
fi

# `kiln build m.lua -o out/m` on a fresh clone: the output directory's parents are created.
if err=$("$KILN" build tests/golden/tiny.lua -o "$WORK/fresh/out/tiny" 2>&1) && [ -f "$WORK/fresh/out/tiny/tiny.c" ]; then
  echo "PASS determinism/fresh_out_dir"
else
  echo "FAIL determinism/fresh_out_dir: kiln build -o DIR/SUB with DIR missing: $(echo "$err" | head -n 1)"
fi

# same DIR1 DIR2 NAME: PASS/FAIL by a recursive byte comparison.
same() {
  if diff -r "$1" "$2" > "$WORK/diff.txt" 2>&1; then
    echo "PASS determinism/$3"
  else
    echo "FAIL determinism/$3: outputs differ: $(head -n 3 "$WORK/diff.txt" | tr '\n' ' ' | cut -c1-300)"
  fi
}

# build NAME CWD SCRIPT OUT: one build; a failure is reported and returns 1.
build() {
  mkdir -p "$(dirname "$4")"
  # shellcheck disable=SC2086
  if ! err=$(cd "$2" && "$KILN" build "$3" $model_targets -o "$4" 2>&1); then
    echo "FAIL determinism/$1: kiln build $3 (in $2) failed: $(echo "$err" | head -n 2 | tr '\n' ' ')"
    return 1
  fi
}

for script in $(kt_models); do
  m=$(basename "$script" .lua)
  dir=$(dirname "$script")
  model_targets=$targets
  if [ "$targets" != "--target c --embed-weights" ] && "$KILN" graph "$script" 2>/dev/null | grep -q '^entry '; then
    model_targets="--target c --target metal --target coreml --min-os iOS18 --embed-weights"
  fi
  mkdir -p "$WORK/tree"
  rm -rf "$WORK/tree/$dir" && mkdir -p "$WORK/tree/$dir" && cp -R "$dir/." "$WORK/tree/$dir/"
  build "$m/a" "$ROOT" "$script" "$WORK/a/$m" &&
    build "$m/a2" "$ROOT" "$script" "$WORK/a2/$m" &&
    build "$m/b" "$WORK/tree" "$script" "$WORK/b/x/y/$m" &&
    build "$m/c" "$ROOT/$dir" "$m.lua" "$WORK/c/$m" &&
    build "$m/d" / "$ROOT/$script" "$WORK/d/$m" || continue
  same "$WORK/a/$m" "$WORK/a2/$m" "$m/run_to_run"
  same "$WORK/a/$m" "$WORK/b/x/y/$m" "$m/other_dirs"
  same "$WORK/a/$m" "$WORK/c/$m" "$m/script_dir_cwd"
  same "$WORK/a/$m" "$WORK/d/$m" "$m/absolute_path"
  n=$(find "$WORK/a/$m" -type f | wc -l)
  [ "$n" -gt 0 ] || echo "FAIL determinism/$m/files: the build wrote no files"

  # Leaks of the environment into any output (binary files included: -a).
  leaks=""
  build_dir=$(basename "$(dirname "$KILN")")
  for pat in "$ROOT" "$WORK" "/tmp/" "/home/" "/work/" "$build_dir/" "kiln-det." "x/y/$m"; do
    hits=$(grep -rlaF -- "$pat" "$WORK/a/$m" "$WORK/b/x/y/$m" "$WORK/d/$m" 2>/dev/null | head -n 3)
    [ -z "$hits" ] || leaks="$leaks '$pat' in $(echo "$hits" | sed "s|$WORK/||g" | tr '\n' ' ')"
  done
  # The host name may be short (random bytes of a weights file would match): text files only.
  host=$(hostname 2>/dev/null)
  if [ -n "$host" ]; then
    hits=$(grep -rlwF --include='*.h' --include='*.c' --include='*.json' --include='*.metal' -- "$host" \
           "$WORK/a/$m" 2>/dev/null | head -n 3)
    [ -z "$hits" ] || leaks="$leaks host name '$host' in $(echo "$hits" | sed "s|$WORK/||g" | tr '\n' ' ')"
  fi
  # Timestamps: ISO dates with a time, clock times, and this year next to a month name.
  hits=$(grep -rlE '[12][0-9]{3}-[01][0-9]-[0-3][0-9][T ][0-2][0-9]:[0-5][0-9]|[0-2][0-9]:[0-5][0-9]:[0-5][0-9]|(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +[0-9]{1,2},? +[12][0-9]{3}' \
         --include='*.h' --include='*.c' --include='*.json' --include='*.metal' --include='*.mil' \
         "$WORK/a/$m" 2>/dev/null | head -n 3)
  [ -z "$hits" ] || leaks="$leaks timestamp-like text in $(echo "$hits" | sed "s|$WORK/||g" | tr '\n' ' ')"
  # Pointer-like hexadecimal (0x55..., 0x7f... with 12 digits) in text outputs.
  hits=$(grep -rlE '0x(55|56|7f)[0-9a-f]{10}\b' --include='*.h' --include='*.c' --include='*.json' \
         "$WORK/a/$m" 2>/dev/null | head -n 3)
  [ -z "$hits" ] || leaks="$leaks pointer-like value in $(echo "$hits" | sed "s|$WORK/||g" | tr '\n' ' ')"
  if [ -n "$leaks" ]; then
    echo "FAIL determinism/$m/no_environment: found$leaks"
  else
    echo "PASS determinism/$m/no_environment"
  fi
done

# --profile writes each kernel's Lua lines into the table: a profiled build from the root and
# one from / with an absolute path give the same bytes, and neither holds an absolute path.
for script in tests/golden/tinystate.lua models/llm.lua; do
  m=$(basename "$script" .lua)
  if "$KILN" build "$script" --profile -o "$WORK/pa/$m" > "$WORK/out" 2>&1 &&
     (cd / && "$KILN" build "$ROOT/$script" --profile -o "$WORK/pd/$m") > "$WORK/out" 2>&1; then
    same "$WORK/pa/$m" "$WORK/pd/$m" "$m/profile_absolute_path"
    hits=$(grep -rlaF -e "$ROOT" -e "$WORK" "$WORK/pa/$m" "$WORK/pd/$m" 2>/dev/null | head -n 2)
    if [ -z "$hits" ]; then echo "PASS determinism/$m/profile_no_paths"
    else echo "FAIL determinism/$m/profile_no_paths: $(echo "$hits" | tr '\n' ' ')"; fi
  else
    echo "FAIL determinism/$m/profile: kiln build --profile failed: $(tail -n 2 "$WORK/out" | tr '\n' ' ')"
  fi
done
