/*
 * onnx.h — what the ONNX importer's files share (onnx_read.c decodes the file,
 * onnx_import.c runs `kiln import`; onnx.lua translates). Nothing else includes it.
 */
#ifndef KILN_ONNX_H
#define KILN_ONNX_H

#include "kiln.h"
#include "onnx.pb-c.h"

#include <lua.h>

typedef struct {
  const char *file;                       /* the .onnx path as the user gave it, for messages */
  Onnx__ModelProto *proto;
  const Onnx__TensorProto **tensors;      /* initializers, Constant values, frozen inputs: by id */
  int ntensors, captensors;
  Onnx__TensorProto *frozen[64];          /* --freeze files, decoded separately */
  int nfrozen;
} OnnxModel;

void onnx_read(OnnxModel *m, const char *path);
void onnx_free(OnnxModel *m);
void onnx_push_model(lua_State *L, OnnxModel *m);
void onnx_push_tensor_file(lua_State *L, OnnxModel *m, const char *path);
void onnx_tensor_to_f32(const OnnxModel *m, int id, float *out, int64_t n);
int64_t onnx_tensor_numel(const OnnxModel *m, int id);
double onnx_tensor_f64(const Onnx__TensorProto *t, int64_t i);
const char *onnx_dtype_name(int dt);

#endif
