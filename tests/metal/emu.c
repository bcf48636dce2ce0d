/*
 * emu.c — the fiber scheduler behind emu.h: threadgroups of cooperative fibers,
 * barriers and SIMD-group collectives as switch points, guarded buffers.
 *
 * Why fibers and not threads: a barrier or simd_sum is a point where a GPU's
 * threads meet; with fibers the meeting is explicit, deterministic for a given
 * order, and cheap (a hand-written x86-64 switch of callee-saved registers, about
 * ten times faster than swapcontext, which makes a system call each time; other
 * architectures, or -DEMU_UCONTEXT, use ucontext). The order in which ready fibers
 * run is chosen per dispatch (forward, reverse, seeded random reshuffled every
 * round), so a kernel whose result depends on it — a missing barrier — gives
 * different answers under different orders and the test comparing them fails.
 *
 * One threadgroup runs at a time, so the statics clang makes of a kernel's
 * threadgroup arrays are that group's threadgroup memory; they are poisoned
 * (0xff: NaN) before each group so reading memory no thread wrote shows up.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* MAP_ANONYMOUS, sigaltstack, ucontext */
#endif
#if defined(__x86_64__) && !defined(EMU_UCONTEXT)
#define EMU_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif
#include "emu.h"

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum {
  EMU_MAX_THREADS = 1024,         /* Metal's limit per threadgroup */
  EMU_SIMD = 32,                  /* lanes per SIMD group on Apple GPUs */
  EMU_STACK = 256 * 1024,         /* per fiber, plus a guard page below */
};

typedef enum { F_READY, F_BARRIER, F_SIMD, F_DONE } FiberState;

typedef struct {
#ifdef EMU_ASM_SWITCH
  void *sp;
#else
  ucontext_t uc;
#endif
  char *stack;                    /* lowest usable byte; the guard page is below */
  FiberState state;
  uint32_t lid, tid[3];
  int line;                       /* source line of the barrier / collective it waits at */
  int op, type;                   /* collective: op (-1: simdgroup_barrier), value type */
  uint32_t val, arg, res;
} Fiber;

/* The shim's SIMD op codes (metal_stdlib, namespace metal). */
enum { S_SUM, S_MAX, S_MIN, S_PSUM_EX, S_PSUM_IN, S_SHUF_DOWN, S_SHUF_UP, S_SHUF_XOR, S_BCAST,
       S_BCAST_FIRST, S_ALL, S_ANY };
enum { T_F32, T_I32, T_U32 };
static const char *const simd_names[] = {"simd_sum", "simd_max", "simd_min", "simd_prefix_exclusive_sum",
                                         "simd_prefix_inclusive_sum", "simd_shuffle_down", "simd_shuffle_up",
                                         "simd_shuffle_xor", "simd_broadcast", "simd_broadcast_first",
                                         "simd_all", "simd_any"};

static struct {
  Fiber fib[EMU_MAX_THREADS];
  int nalloc;                     /* fibers with a stack */
  int n;                          /* fibers in the current threadgroup */
  Fiber *cur;
#ifdef EMU_ASM_SWITCH
  void *sched_sp;
#else
  ucontext_t sched_uc;
#endif
  const EmuDispatch *d;
  uint32_t group[3];
  uint64_t rng;
  int order[EMU_MAX_THREADS];
  EmuStats stats;
} E;

/* ---- failure reporting ---- */

static void emu_where(char *out, size_t n) {
  if (!E.d) {
    snprintf(out, n, "outside any dispatch");
    return;
  }
  int k = snprintf(out, n, "kernel %s, threadgroup (%u,%u,%u)", E.d->kernel, E.group[0], E.group[1], E.group[2]);
  if (E.cur && k > 0 && (size_t)k < n)
    snprintf(out + k, n - (size_t)k, ", thread (%u,%u,%u)", E.cur->tid[0], E.cur->tid[1], E.cur->tid[2]);
}

/* Prints "emu: FAIL in <where>: <message>" and exits 3: the run's result is void. */
static _Noreturn void emu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void emu_fail(const char *fmt, ...) {
  char where[256];
  emu_where(where, sizeof where);
  fflush(stdout);
  fprintf(stderr, "emu: FAIL in %s: ", where);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stdout);
  fflush(stderr);
  _exit(3);
}

/* ---- context switching ---- */

#ifdef EMU_ASM_SWITCH
/* void emu_switch(void **save_sp, void *load_sp): pushes the callee-saved
 * registers, saves the stack pointer, loads the other one, pops and returns into
 * the other context. Floating-point control state is never changed by kernels. */
void emu_switch(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".type emu_switch,@function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, .-emu_switch\n"
        ".section .note.GNU-stack,\"\",@progbits\n"
        ".text\n");
#endif

static void fiber_main(void);

/* Enters the scheduler from the current fiber (which has set its state). */
static void to_scheduler(void) {
  Fiber *f = E.cur;
#ifdef EMU_ASM_SWITCH
  emu_switch(&f->sp, E.sched_sp);
#else
  swapcontext(&f->uc, &E.sched_uc);
#endif
}

/* Runs fiber f until it blocks or finishes. */
static void run_fiber(Fiber *f) {
  E.cur = f;
#ifdef EMU_ASM_SWITCH
  emu_switch(&E.sched_sp, f->sp);
#else
  swapcontext(&E.sched_uc, &f->uc);
#endif
  E.cur = NULL;
}

/* Gives fiber f a fresh stack frame that starts fiber_main. */
static void fiber_reset(Fiber *f) {
  if (!f->stack) {
    long pg = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, EMU_STACK + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) emu_fail("cannot map a fiber stack");
    if (mprotect(m, (size_t)pg, PROT_NONE) != 0) emu_fail("cannot protect a stack guard page");
    f->stack = m + pg;
  }
#ifdef EMU_ASM_SWITCH
  uintptr_t top = ((uintptr_t)f->stack + EMU_STACK) & ~(uintptr_t)15;
  void **sp = (void **)top;
  *--sp = NULL;                          /* fiber_main's (never used) return address */
  *--sp = (void *)(uintptr_t)fiber_main; /* where emu_switch's ret goes */
  for (int i = 0; i < 6; i++) *--sp = NULL;  /* rbp rbx r12-r15 */
  f->sp = sp;
#else
  if (getcontext(&f->uc) != 0) emu_fail("getcontext failed");
  f->uc.uc_stack.ss_sp = f->stack;
  f->uc.uc_stack.ss_size = EMU_STACK;
  f->uc.uc_link = NULL;
  makecontext(&f->uc, fiber_main, 0);
#endif
}

/* A fiber's whole life: run the kernel, then park as DONE. */
static void fiber_main(void) {
  kiln_emu_launch(E.d->kernel_index, E.d->bufs);
  E.cur->state = F_DONE;
  to_scheduler();
  emu_fail("a finished fiber was resumed");
}

/* ---- what the kernels call (through the shim) ---- */

uint32_t kiln_emu_builtin(int which, int comp);
void kiln_emu_barrier(int simd_only, int line);
uint32_t kiln_emu_simd(int op, int type, uint32_t bits, uint32_t arg, int line);

/* The value of a built-in attribute for the current fiber (order as in the shim's
 * KILN_B_* enum): position in grid, in threadgroup, threadgroup position, threads
 * per threadgroup, threadgroups per grid, index in threadgroup, lane, SIMD group,
 * threads per SIMD group. */
uint32_t kiln_emu_builtin(int which, int comp) {
  Fiber *f = E.cur;
  if (!f) emu_fail("built-in read outside a fiber");
  if (comp < 0 || comp > 2) emu_fail("built-in component %d", comp);
  const EmuDispatch *d = E.d;
  switch (which) {
  case 0: return E.group[comp] * d->threads[comp] + f->tid[comp];
  case 1: return f->tid[comp];
  case 2: return E.group[comp];
  case 3: return d->threads[comp];
  case 4: return d->groups[comp];
  case 5: return f->lid;
  case 6: return f->lid % EMU_SIMD;
  case 7: return f->lid / EMU_SIMD;
  case 8: return EMU_SIMD;
  }
  emu_fail("unknown built-in %d", which);
}

void kiln_emu_barrier(int simd_only, int line) {
  Fiber *f = E.cur;
  if (!f) emu_fail("barrier outside a fiber");
  f->line = line;
  if (simd_only) {
    f->state = F_SIMD;
    f->op = -1;
    f->type = 0;
    f->arg = 0;
  } else {
    f->state = F_BARRIER;
  }
  to_scheduler();
}

uint32_t kiln_emu_simd(int op, int type, uint32_t bits, uint32_t arg, int line) {
  Fiber *f = E.cur;
  if (!f) emu_fail("SIMD-group function outside a fiber");
  f->state = F_SIMD;
  f->op = op;
  f->type = type;
  f->val = bits;
  f->arg = arg;
  f->line = line;
  to_scheduler();
  return f->res;
}

/* ---- SIMD-group collectives ---- */

static float as_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t from_f(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* a op b for the value type; op is S_SUM, S_MAX or S_MIN. */
static uint32_t combine(int op, int type, uint32_t a, uint32_t b) {
  if (type == T_F32) {
    float x = as_f(a), y = as_f(b);
    return from_f(op == S_SUM ? x + y : op == S_MAX ? (x > y || y != y ? x : y) : (x < y || y != y ? x : y));
  }
  if (type == T_I32) {
    int32_t x = (int32_t)a, y = (int32_t)b;
    return (uint32_t)(op == S_SUM ? (int32_t)((uint32_t)x + (uint32_t)y) : op == S_MAX ? (x > y ? x : y) : (x < y ? x : y));
  }
  return op == S_SUM ? a + b : op == S_MAX ? (a > b ? a : b) : (a < b ? a : b);
}

/* The value an undefined read gives: a NaN for floats, a loud pattern otherwise. */
static uint32_t poison(int type) { return type == T_F32 ? 0x7fc0dead : 0xdeadbeef; }

/* Resolves one SIMD group whose live lanes (lane[i] or NULL) all wait at a collective. */
static void simd_resolve(Fiber **lane) {
  Fiber *first = NULL;
  for (int i = 0; i < EMU_SIMD; i++)
    if (lane[i]) {
      if (!first) first = lane[i];
      else if (lane[i]->op != first->op || lane[i]->line != first->line || lane[i]->type != first->type)
        emu_fail("divergent SIMD group: lane %d at %s (line %d), lane %u at %s (line %d)", i,
                 lane[i]->op < 0 ? "simdgroup_barrier" : simd_names[lane[i]->op], lane[i]->line, first->lid % EMU_SIMD,
                 first->op < 0 ? "simdgroup_barrier" : simd_names[first->op], first->line);
      else if ((first->op == S_SHUF_DOWN || first->op == S_SHUF_UP || first->op == S_SHUF_XOR ||
                first->op == S_BCAST) && lane[i]->arg != first->arg)
        emu_fail("%s (line %d): lanes pass different operands (%u, %u); MSL wants it uniform",
                 simd_names[first->op], first->line, first->arg, lane[i]->arg);
    }
  int op = first->op, type = first->type;
  uint32_t acc = 0, prefix = op == S_PSUM_EX || op == S_PSUM_IN ? (type == T_F32 ? from_f(0.0f) : 0) : 0;
  bool have = false, all = true, any = false;
  int lowest = -1;
  for (int i = 0; i < EMU_SIMD; i++) {
    if (!lane[i]) continue;
    if (lowest < 0) lowest = i;
    acc = have ? combine(op == S_MAX || op == S_MIN ? op : S_SUM, type, acc, lane[i]->val) : lane[i]->val;
    have = true;
    all = all && lane[i]->val;
    any = any || lane[i]->val;
  }
  for (int i = 0; i < EMU_SIMD; i++) {
    Fiber *f = lane[i];
    if (!f) continue;
    int src;
    switch (op) {
    case -1: break;
    case S_SUM: case S_MAX: case S_MIN: f->res = acc; break;
    case S_PSUM_EX: f->res = prefix; prefix = combine(S_SUM, type, prefix, f->val); break;
    case S_PSUM_IN: prefix = combine(S_SUM, type, prefix, f->val); f->res = prefix; break;
    case S_ALL: f->res = all; break;
    case S_ANY: f->res = any; break;
    case S_BCAST_FIRST: f->res = lane[lowest]->val; break;
    case S_SHUF_DOWN: case S_SHUF_UP: case S_SHUF_XOR: case S_BCAST:
      src = op == S_SHUF_DOWN ? i + (int)f->arg : op == S_SHUF_UP ? i - (int)f->arg
          : op == S_SHUF_XOR ? (i ^ (int)f->arg) : (int)f->arg;
      if (src < 0 || src >= EMU_SIMD) f->res = f->val;          /* out of range: keeps its own */
      else f->res = lane[src] ? lane[src]->val : poison(type);   /* inactive source: undefined */
      break;
    default: emu_fail("unknown SIMD op %d", op);
    }
    f->state = F_READY;
  }
  E.stats.collectives++;
}

/* ---- the scheduler ---- */

static uint64_t rng_next(void) {
  E.rng ^= E.rng << 13;
  E.rng ^= E.rng >> 7;
  E.rng ^= E.rng << 17;
  return E.rng;
}

/* Fills E.order with 0..n-1 in the dispatch's order (a new shuffle each call). */
static void make_order(int n, EmuOrder o) {
  for (int i = 0; i < n; i++) E.order[i] = o == EMU_REVERSE ? n - 1 - i : i;
  if (o == EMU_RANDOM)
    for (int i = n - 1; i > 0; i--) {
      int j = (int)(rng_next() % (uint64_t)(i + 1));
      int t = E.order[i];
      E.order[i] = E.order[j];
      E.order[j] = t;
    }
}

/* After every fiber has blocked or finished: resolves what can be resolved.
 * Returns false when every fiber is done. Fails on divergence or deadlock. */
static bool resolve(void) {
  bool progress = false, live = false;
  for (int g = 0; g * EMU_SIMD < E.n; g++) {
    Fiber *lane[EMU_SIMD] = {0};
    bool waiting = true, any = false;
    for (int i = 0; i < EMU_SIMD && g * EMU_SIMD + i < E.n; i++) {
      Fiber *f = &E.fib[g * EMU_SIMD + i];
      if (f->state == F_DONE) continue;
      any = true;
      if (f->state != F_SIMD) waiting = false;
      lane[i] = f;
    }
    live |= any;
    if (any && waiting) {
      simd_resolve(lane);
      progress = true;
    }
  }
  if (progress) return true;
  if (!live) return false;
  int at_barrier = 0, done = 0, line = -1;
  for (int i = 0; i < E.n; i++) {
    Fiber *f = &E.fib[i];
    if (f->state == F_DONE) done++;
    else if (f->state == F_SIMD) {
      E.cur = f;
      emu_fail("%s (line %d) waits for lanes of its SIMD group that are at a threadgroup barrier (divergence)",
               f->op < 0 ? "simdgroup_barrier" : simd_names[f->op], f->line);
    } else if (f->state == F_BARRIER) {
      if (line >= 0 && f->line != line) {
        E.cur = f;
        emu_fail("threads wait at different threadgroup barriers (lines %d and %d)", line, f->line);
      }
      line = f->line;
      at_barrier++;
    }
  }
  if (done) emu_fail("threadgroup_barrier (line %d) reached by %d of %d threads; the others returned", line,
                     at_barrier, E.n);
  for (int i = 0; i < E.n; i++) E.fib[i].state = F_READY;
  E.stats.barriers++;
  return true;
}

/* Runs one threadgroup to completion. */
static void run_group(void) {
  const EmuDispatch *d = E.d;
  for (int i = 0; i < d->ntg; i++) memset(d->tg[i].ptr, 0xff, d->tg[i].size);
  uint32_t tx = d->threads[0], ty = d->threads[1];
  for (int i = 0; i < E.n; i++) {
    Fiber *f = &E.fib[i];
    fiber_reset(f);
    f->state = F_READY;
    f->lid = (uint32_t)i;
    f->tid[0] = (uint32_t)i % tx;
    f->tid[1] = (uint32_t)i / tx % ty;
    f->tid[2] = (uint32_t)i / (tx * ty);
  }
  do {
    make_order(E.n, d->order);
    for (int k = 0; k < E.n; k++) {
      Fiber *f = &E.fib[E.order[k]];
      if (f->state == F_READY) run_fiber(f);
    }
  } while (resolve());
  E.stats.threadgroups++;
  E.stats.threads += (uint64_t)E.n;
}

static void install_handler(void);

void emu_run(const EmuDispatch *d) {
  install_handler();
  E.d = d;
  E.rng = d->seed * 0x9E3779B97F4A7C15ull + 1;
  uint64_t n = (uint64_t)d->threads[0] * d->threads[1] * d->threads[2];
  if (n == 0 || n > EMU_MAX_THREADS) emu_fail("%llu threads per threadgroup (1..%d)", (unsigned long long)n, EMU_MAX_THREADS);
  E.n = (int)n;
  uint64_t ng = (uint64_t)d->groups[0] * d->groups[1] * d->groups[2];
  if (ng == 0) emu_fail("empty grid");
  /* The groups' order follows the fibers' (a kernel must not depend on it either). */
  uint64_t *gorder = malloc(sizeof *gorder * ng);
  if (!gorder) emu_fail("out of memory");
  for (uint64_t i = 0; i < ng; i++) gorder[i] = d->order == EMU_REVERSE ? ng - 1 - i : i;
  if (d->order == EMU_RANDOM)
    for (uint64_t i = ng - 1; i > 0; i--) {
      uint64_t j = rng_next() % (i + 1), t = gorder[i];
      gorder[i] = gorder[j];
      gorder[j] = t;
    }
  for (uint64_t i = 0; i < ng; i++) {
    uint64_t g = gorder[i];
    E.group[0] = (uint32_t)(g % d->groups[0]);
    E.group[1] = (uint32_t)(g / d->groups[0] % d->groups[1]);
    E.group[2] = (uint32_t)(g / ((uint64_t)d->groups[0] * d->groups[1]));
    run_group();
  }
  free(gorder);
  E.d = NULL;
}

EmuStats emu_stats(void) { return E.stats; }

/* ---- guarded buffers ---- */

typedef struct {
  char *map, *p;
  size_t maplen, n;
  const char *name;
} Guarded;
static Guarded guarded[512];

void *emu_guarded_alloc(size_t n, int fill, const char *name) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t body = (n + pg - 1) / pg * pg;
  if (body == 0) body = pg;
  size_t len = body + 2 * pg;   /* guard page, body, guard page */
  char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) emu_fail("cannot map a %zu-byte buffer", n);
  if (mprotect(m, pg, PROT_NONE) != 0 || mprotect(m + pg + body, pg, PROT_NONE) != 0)
    emu_fail("cannot protect guard pages");
  char *p = m + pg + body - n;
  memset(m + pg, 0xa5, body - n);
  memset(p, fill, n);
  for (int i = 0; i < 512; i++)
    if (!guarded[i].map) {
      guarded[i] = (Guarded){m, p, len, n, name};
      return p;
    }
  emu_fail("more than 512 guarded buffers");
}

void emu_guarded_free(void *p) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < 512; i++)
    if (guarded[i].p == p && guarded[i].map) {
      Guarded *g = &guarded[i];
      for (char *c = g->map + pg; c < g->p; c++)
        if ((unsigned char)*c != 0xa5)
          emu_fail("buffer %s was written %td bytes below its start", g->name, g->p - c);
      munmap(g->map, g->maplen);
      *g = (Guarded){0};
      return;
    }
  emu_fail("freeing an unknown guarded buffer");
}

/* SIGSEGV/SIGBUS: name the buffer (or fiber stack) whose guard page was hit. */
static void on_fault(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  char *a = si->si_addr;
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  for (int i = 0; i < 512; i++) {
    Guarded *g = &guarded[i];
    if (!g->map || a < g->map || a >= g->map + g->maplen) continue;
    if (a >= g->p) emu_fail("out-of-bounds access to buffer %s: byte %td of %zu", g->name, a - g->p, g->n);
    emu_fail("out-of-bounds access to buffer %s: %td bytes below its start", g->name, g->p - a);
  }
  for (int i = 0; i < EMU_MAX_THREADS; i++) {
    Fiber *f = &E.fib[i];
    if (f->stack && a >= f->stack - pg && a < f->stack) emu_fail("fiber stack overflow");
  }
  emu_fail("signal %d at address %p (not a guard page: wild pointer?)", sig, (void *)a);
}

static void install_handler(void) {
  static bool done;
  if (done) return;
  done = true;
  static char altstack[64 * 1024];
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
}

/* ---- half <-> float ---- */

uint16_t __gnu_f2h_ieee(float f) {
  uint32_t x = from_f(f);
  uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u | (m >> 13) : 0));
  int32_t he = (int32_t)e - 127 + 15;
  if (he >= 0x1f) return (uint16_t)(sign | 0x7c00u);
  if (he <= 0) {
    if (he < -10) return (uint16_t)sign;
    m |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - he);
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)he << 10) | (m >> 13), rem = m & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;   /* may carry into the exponent: correct */
  return (uint16_t)(sign | h);
}

float __gnu_h2f_ieee(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return as_f(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (!m) return as_f(sign);
    int sh = 0;
    while (!(m & 0x400u)) {
      m <<= 1;
      sh++;
    }
    return as_f(sign | (uint32_t)(113 - sh) << 23 | ((m & 0x3ffu) << 13));
  }
  return as_f(sign | (e + 112) << 23 | (m << 13));
}
