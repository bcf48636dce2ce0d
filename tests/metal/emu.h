/*
 * emu.h — a Metal compute emulator for Linux tests: runs MSL kernels (compiled
 * by clang as C++ for OpenCL against tests/metal/include/metal_stdlib) on CPU
 * fibers, one per thread of a threadgroup.
 *
 * A fiber runs until it reaches a threadgroup barrier or a SIMD-group function;
 * then the others run. When every live fiber is blocked the scheduler resolves
 * SIMD-group collectives (32-lane groups, lanes that returned are inactive) and
 * then threadgroup barriers. Anything a GPU would leave undefined and that Kiln
 * must never rely on is reported and fails the run: a barrier reached by only
 * some threads, divergent collectives, a deadlock, an access past a buffer's end
 * (buffers end against a PROT_NONE page), a write below a buffer's start (canary
 * bytes), a fiber stack overflow. The order in which fibers (and threadgroups) run
 * is a parameter, so a missing barrier shows up as a result that depends on it.
 */
#ifndef KILN_EMU_H
#define KILN_EMU_H

#include <stddef.h>
#include <stdint.h>

typedef enum { EMU_FORWARD, EMU_REVERSE, EMU_RANDOM } EmuOrder;

/* Threadgroup memory of one kernel: the statics clang made of its threadgroup
 * arrays (tests/metal/mslreflect.py finds them in the object file). */
typedef struct {
  void *ptr;
  size_t size;
} EmuTgMem;

typedef struct {
  const char *kernel;          /* name, for messages */
  int kernel_index;            /* argument to kiln_emu_launch */
  void *const *bufs;           /* buffer(i) -> bufs[i] */
  int nbufs;
  uint32_t groups[3];          /* threadgroups per grid */
  uint32_t threads[3];         /* threads per threadgroup */
  EmuOrder order;
  uint64_t seed;               /* EMU_RANDOM */
  const EmuTgMem *tg;          /* poisoned (0xff bytes: NaN) before every threadgroup */
  int ntg;
} EmuDispatch;

/* Runs one dispatch to completion; on any fault prints a message naming the
 * kernel, threadgroup and thread, and exits with status 3. */
void emu_run(const EmuDispatch *d);

/* Supplied by the generated launcher object: calls kernel k with buffers b and
 * the built-ins of the current fiber. */
void kiln_emu_launch(int k, void *const *b);

/* A buffer of n bytes whose end abuts a PROT_NONE page; the bytes before it in its
 * first page are a canary. fill: initial byte value. name: for fault messages. */
void *emu_guarded_alloc(size_t n, int fill, const char *name);
/* Checks the canary (exit 3 with a message if a write went below the start) and
 * unmaps the buffer. */
void emu_guarded_free(void *p);

/* Statistics since start: fibers run, barriers and SIMD collectives resolved. */
typedef struct {
  uint64_t threadgroups, threads, barriers, collectives;
} EmuStats;
EmuStats emu_stats(void);

/* IEEE half conversions clang calls for `half` arithmetic (round to nearest even). */
uint16_t __gnu_f2h_ieee(float f);
float __gnu_h2f_ieee(uint16_t h);

#endif
