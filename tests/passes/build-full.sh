#!/bin/sh
# Builds the pass test driver with the real frontend, for `gtest plan MODEL.lua...`:
# links every object of a kiln build directory except main.o. build-full.sh BUILD_DIR OUT
set -eu
b=$1; out=$2
objs=$(ls "$b"/*.o "$b"/*/*.o | grep -v '/main\.o$')
lua_cflags=$(pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4)
lua_libs=$(pkg-config --libs lua5.4 2>/dev/null || echo -llua5.4)
pbc_libs=$(pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
${CC:-cc} -std=c11 -Wall -Wextra -Wpedantic -Werror -O1 -g -DGTEST_FRONTEND -D_POSIX_C_SOURCE=200809L -Igen -I"$b" \
  $lua_cflags -o "$out" tests/passes/gtest.c $objs $lua_libs $pbc_libs -lm
