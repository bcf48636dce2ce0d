# Kiln — an ahead-of-time model compiler. See README.md.
#   make            install what is missing, build build/kiln
#   make demo       install what is missing, build, compile the demo model, run it
#   make test       install what is missing, build, run every test (last line: N passed, N failed)
#   make bench      speed of the generated code next to its peers, as ratios (docs/bench.md;
#                   BENCH="models peers" selects parts, BENCH_QUICK=1 a smoke run)
#   make san        build $(BUILD)-san/kiln (build-san/kiln) with ASan + UBSan
#   make fuzz       run every libFuzzer harness FUZZ_SECONDS (default 60) each
# BUILD=dir puts objects elsewhere (parallel work trees); CC=clang works too.

CC      ?= cc
BUILD   ?= build
WARN    = -std=c11 -Wall -Wextra -Wpedantic -Werror
CFLAGS  ?= -O2 -g
LUA_CFLAGS := $(shell pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4)
LUA_LIBS   := $(shell pkg-config --libs lua5.4 2>/dev/null || echo -llua5.4)
PBC_LIBS   := $(shell pkg-config --libs libprotobuf-c 2>/dev/null || echo -lprotobuf-c)
CPPFLAGS = -D_POSIX_C_SOURCE=200809L -Igen -Iruntime/llm -I$(BUILD) $(LUA_CFLAGS)
LDLIBS  = $(LUA_LIBS) $(PBC_LIBS) -lm -pthread

SRCS    = $(sort $(wildcard gen/*.c gen/*/*.c))
OBJS    = $(SRCS:gen/%.c=$(BUILD)/%.o)
# Protocol buffer schemas: Core ML's (emitters, gen/target/) and ONNX's (importer, gen/frontend/).
PROTOS  = $(sort $(wildcard gen/target/*.proto gen/frontend/*.proto))
PB_SRCS = $(patsubst %.proto,$(BUILD)/%.pb-c.c,$(notdir $(PROTOS)))
PB_OBJS = $(PB_SRCS:.c=.o)
EMBED   = $(sort $(shell find templates -type f 2>/dev/null) $(wildcard gen/*/*.lua))

.PHONY: all deps demo test bench san fuzz clean llm
# Every entry point first installs what is missing (a no-op when all is there).
all: deps
	@$(MAKE) --no-print-directory $(BUILD)/kiln

deps:
	@sh scripts/install-deps.sh

TOK_SRCS = $(sort $(wildcard runtime/llm/kiln_tok*.c))
TOK_OBJS = $(sort $(TOK_SRCS:runtime/llm/%.c=$(BUILD)/runtime/%.o))
$(BUILD)/kiln: $(OBJS) $(PB_OBJS) $(BUILD)/embedded.o $(TOK_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# `kiln tokenize` runs the runtime's own tokenizers: one implementation for both.
$(BUILD)/runtime/%.o: runtime/llm/%.c runtime/llm/*.h | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -c -o $@ $<

# Objects depend on every header: the core types change rarely, and a full rebuild is cheap.
$(BUILD)/%.o: gen/%.c gen/*.h gen/*/*.h $(PB_SRCS) | $(BUILD)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) -c -o $@ $<

$(BUILD)/%.pb-c.c: gen/target/%.proto | $(BUILD)
	protoc-c --proto_path=gen/target --c_out=$(BUILD) $<

$(BUILD)/%.pb-c.c: gen/frontend/%.proto | $(BUILD)
	protoc-c --proto_path=gen/frontend --c_out=$(BUILD) $<

# Keep the generated sources (not intermediates to delete, which rebuilt everything on
# every make), and generate them all before compiling any: one .proto imports another.
.SECONDARY: $(PB_SRCS)
$(PB_OBJS): $(PB_SRCS)

# protoc-c's output is not ours: built without -Wpedantic -Werror.
$(BUILD)/%.pb-c.o: $(BUILD)/%.pb-c.c
	$(CC) -std=c11 $(CFLAGS) $(CPPFLAGS) -c -o $@ $<

$(BUILD)/embedded.c: $(EMBED) scripts/embed.sh | $(BUILD)
	@echo "embed $@ ($(words $(EMBED)) files from templates/ and gen/)"
	@sh scripts/embed.sh $@ $(EMBED)

$(BUILD)/embedded.o: $(BUILD)/embedded.c
	$(CC) $(WARN) $(CFLAGS) -c -o $@ $<

$(BUILD):
	mkdir -p $(BUILD)

# -O0: builds in half the time of -O1 (t_compile builds it on every run); the sanitizers
# instrument the same accesses at any level.
san:
	$(MAKE) BUILD=$(BUILD)-san CFLAGS="-O0 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"

FUZZ_SECONDS ?= 60
# all, not deps: the ONNX harness links the build's generated build/embedded.c and onnx.pb-c.c.
fuzz: all
	@sh scripts/fuzz.sh $(FUZZ_SECONDS)

demo: all
	@KILN=$(abspath $(BUILD))/kiln sh scripts/demo.sh

# The generation program for a language model built into OUT (scripts/llm_build.sh).
llm:
	@sh scripts/llm_build.sh "$(OUT)"

test: all
	@KILN=$(abspath $(BUILD))/kiln sh tests/run.sh

bench: all
	@KILN=$(abspath $(BUILD))/kiln sh scripts/bench.sh

clean:
	rm -rf build build-san build-fuzz out
