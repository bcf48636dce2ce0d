/*
 * onnx.h — what the ONNX importer's files share (onnx_read.c decodes the file,
 * onnx_import.c runs `kiln import`; onnx.lua translates). Nothing else includes it.
 */
#ifndef KILN_ONNX_H
#define KILN_ONNX_H

#include "kiln.h"
#include "onnx.pb-c.h"

#include <lua.h>
#include <setjmp.h>

typedef struct {
  const char *file;                       /* the .onnx path as the user gave it, for messages */
  Onnx__ModelProto *proto;
  const Onnx__TensorProto **tensors;      /* initializers, Constant values, frozen inputs: by id */
  int ntensors, captensors;
  Onnx__TensorProto *frozen[64];          /* --freeze files, decoded separately */
  int nfrozen;
  jmp_buf *escape;                        /* NULL: errors exit (kiln_error); else longjmp here */
  char *errbuf;                           /* with escape: the error message goes here */
  size_t errlen;
} OnnxModel;

_Noreturn void onnx_fail(const OnnxModel *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void onnx_read(OnnxModel *m, const char *path);
void onnx_decode(OnnxModel *m, const unsigned char *data, size_t size);
/* onnx_import.c: runs the translator on m (defines: -D NAME=VALUE strings, freeze:
 * --freeze NAME=FILE.pb); leaves the script text and the weights list on L's stack. */
void onnx_translate(lua_State *L, OnnxModel *m, const char *const *defines, int ndefines, const char *const *freeze,
                    int nfreeze, const char *name);
void onnx_free(OnnxModel *m);
void onnx_push_model(lua_State *L, OnnxModel *m);
void onnx_push_tensor_file(lua_State *L, OnnxModel *m, const char *path);
void onnx_tensor_to_f32(const OnnxModel *m, int id, float *out, int64_t n);
int64_t onnx_tensor_numel(const OnnxModel *m, int id);
double onnx_tensor_f64(const Onnx__TensorProto *t, int64_t i);
const char *onnx_dtype_name(int dt);

#endif
