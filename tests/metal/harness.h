/*
 * harness.h — the tables tests/metal/mslreflect.py generates for one .metal file,
 * read by harness.c: what each kernel's signature says (reflection) and where
 * clang put each kernel's threadgroup memory.
 */
#ifndef KILN_HARNESS_H
#define KILN_HARNESS_H

#include <stddef.h>

typedef struct {
  const char *name;
  int nbufs;               /* [[buffer(0..nbufs-1)]] */
  const char *sig;         /* per buffer index "elem:r" (const) or "elem:w", comma-separated */
} EmuKernelInfo;

typedef struct {
  int kernel;              /* index into kiln_emu_kernels, -1 ends the table */
  void *ptr;
  size_t size;
  const char *var;
} EmuTgSym;

extern const EmuKernelInfo kiln_emu_kernels[];
extern const int kiln_emu_nkernels;
extern const EmuTgSym kiln_emu_tgsyms[];

#endif
