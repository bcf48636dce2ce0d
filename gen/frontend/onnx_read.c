/*
 * onnx_read.c — decodes an ONNX model file (protobuf, through protobuf-c and
 * gen/frontend/onnx.proto) and hands it to the translator (onnx.lua) as plain Lua
 * tables.
 *
 * The split: C does everything that touches bytes of the file — protobuf decoding,
 * the size and count checks of every tensor, decoding raw_data and the typed fields —
 * so a malformed file is refused here with one line, before any Lua runs. The
 * translation of ONNX ops onto Kiln's Lua API is Lua (onnx.lua): it writes Lua text,
 * and it is the same kind of code as ops.lua's compositions.
 *
 * What Lua sees (onnx_push_model):
 *   model.opset               the default domain's opset version
 *   model.inputs / outputs    {name=, dtype=ONNX code, dims={n or "param", ...}}
 *   model.inits               {name=, dtype=, dims=, values=(small tensors), id=}
 *   model.nodes               {op=, domain=, name=, inputs=, outputs=, attrs={name={kind=, v=}}}
 * A tensor's id indexes OnnxModel.tensors, from which onnx_write_weights copies the data
 * of the float tensors the script loads as parameters.
 */
#include "frontend/onnx.h"

#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ONNX TensorProto.DataType codes the reader decodes (onnx.proto has them all). */
enum {
  OT_FLOAT = 1, OT_UINT8 = 2, OT_INT8 = 3, OT_UINT16 = 4, OT_INT16 = 5, OT_INT32 = 6, OT_INT64 = 7, OT_BOOL = 9,
  OT_FLOAT16 = 10, OT_DOUBLE = 11, OT_UINT32 = 12, OT_UINT64 = 13, OT_BFLOAT16 = 16
};

/* Tensors up to this many elements are given to Lua as values (shapes, axes, indices,
 * scalars), enough for constant folding; larger ones only by id. */
#define ONNX_LUA_VALUES_MAX 4096

/* Bytes per element of the dtypes whose data can be decoded, or 0. */
static int elem_size(int dt) {
  switch (dt) {
  case OT_FLOAT: case OT_INT32: case OT_UINT32: return 4;
  case OT_INT64: case OT_DOUBLE: case OT_UINT64: return 8;
  case OT_UINT16: case OT_INT16: case OT_FLOAT16: case OT_BFLOAT16: return 2;
  case OT_UINT8: case OT_INT8: case OT_BOOL: return 1;
  default: return 0;
  }
}

/* A name for messages: the ONNX name, or a placeholder when the file gives none. */
static const char *shown(const char *name) { return name && *name ? name : "(unnamed)"; }

/* Contract: the element count of t, checked (every dim >= 0, product <= KILN_MAX_NUMEL);
 * a bad shape is the user's error naming the tensor. */
static int64_t tensor_numel(const OnnxModel *m, const Onnx__TensorProto *t) {
  int64_t n = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0) onnx_fail(m, "%s: tensor '%s': dim %zu is %lld", m->file, shown(t->name), i, (long long)t->dims[i]);
    if (t->dims[i] > 0 && n > KILN_MAX_NUMEL / t->dims[i])
      onnx_fail(m, "%s: tensor '%s': more than %lld elements", m->file, shown(t->name), (long long)KILN_MAX_NUMEL);
    n *= t->dims[i];
  }
  if (t->n_dims > KILN_MAX_RANK)
    onnx_fail(m, "%s: tensor '%s': rank %zu (Kiln's limit is %d)", m->file, shown(t->name), t->n_dims, KILN_MAX_RANK);
  return n;
}

/* Contract: element i of tensor t as a double (integers up to 2^53 exactly; int64 values
 * beyond that are read through onnx_tensor_i64; float16 and bfloat16 widened exactly).
 * raw_data is little-endian, as ONNX stores it; the typed fields hold the 16-bit types'
 * bits in int32_data. The data was checked by check_tensor. */
double onnx_tensor_f64(const Onnx__TensorProto *t, int64_t i) {
  if (t->has_raw_data) {
    const unsigned char *p = t->raw_data.data + i * elem_size(t->data_type);
    uint16_t h = (uint16_t)(p[0] | (elem_size(t->data_type) > 1 ? p[1] << 8 : 0));
    switch (t->data_type) {
    case OT_FLOAT: { float f; memcpy(&f, p, 4); return f; }
    case OT_DOUBLE: { double d; memcpy(&d, p, 8); return d; }
    case OT_INT32: { int32_t v; memcpy(&v, p, 4); return v; }
    case OT_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case OT_INT64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case OT_UINT64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
    case OT_INT8: return (int8_t)*p;
    case OT_INT16: return (int16_t)h;
    case OT_UINT16: return h;
    case OT_FLOAT16: return kiln_f16_to_f32(h);
    case OT_BFLOAT16: return kiln_bf16_to_f32(h);
    default: return *p;
    }
  }
  switch (t->data_type) {
  case OT_FLOAT: return t->float_data[i];
  case OT_DOUBLE: return t->double_data[i];
  case OT_INT64: return (double)t->int64_data[i];
  case OT_UINT32: case OT_UINT64: return (double)t->uint64_data[i];
  case OT_INT8: return (int8_t)t->int32_data[i];
  case OT_INT16: return (int16_t)t->int32_data[i];
  case OT_UINT16: return (uint16_t)t->int32_data[i];
  case OT_FLOAT16: return kiln_f16_to_f32((uint16_t)t->int32_data[i]);
  case OT_BFLOAT16: return kiln_bf16_to_f32((uint16_t)t->int32_data[i]);
  default: return t->int32_data[i];
  }
}

/* Element i of an integer tensor, exactly (a uint64 past 2^63 saturates to INT64_MAX:
 * the translator's int32 range check refuses it either way). */
static int64_t tensor_i64(const Onnx__TensorProto *t, int64_t i) {
  if (t->data_type == OT_UINT64) {
    uint64_t u = t->uint64_data ? t->uint64_data[i] : 0;
    if (t->has_raw_data) memcpy(&u, t->raw_data.data + i * 8, 8);
    return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
  }
  if (t->data_type != OT_INT64) return (int64_t)onnx_tensor_f64(t, i);
  if (!t->has_raw_data) return t->int64_data[i];
  int64_t v;
  memcpy(&v, t->raw_data.data + i * 8, 8);
  return v;
}

/* Contract: t's data is present and exactly numel elements long, in raw_data or the
 * typed field its dtype uses; external data and undecodable dtypes are refused. */
static void check_tensor(const OnnxModel *m, const Onnx__TensorProto *t) {
  int64_t n = tensor_numel(m, t);
  if (t->has_data_location && t->data_location == 1)
    onnx_fail(m, "%s: tensor '%s': external data (a separate file) is not supported", m->file, shown(t->name));
  int es = elem_size(t->data_type);
  if (!es) onnx_fail(m, "%s: tensor '%s': unsupported dtype %s", m->file, shown(t->name), onnx_dtype_name(t->data_type));
  size_t have;
  if (t->has_raw_data) have = t->raw_data.len / (size_t)es;
  else if (t->data_type == OT_FLOAT) have = t->n_float_data;
  else if (t->data_type == OT_DOUBLE) have = t->n_double_data;
  else if (t->data_type == OT_INT64) have = t->n_int64_data;
  else if (t->data_type == OT_UINT32 || t->data_type == OT_UINT64) have = t->n_uint64_data;
  else have = t->n_int32_data;
  if ((t->has_raw_data && t->raw_data.len != (size_t)n * (size_t)es) || (!t->has_raw_data && have != (size_t)n))
    onnx_fail(m, "%s: tensor '%s': %lld elements in its shape, %zu in its data (truncated file?)", m->file,
               shown(t->name), (long long)n, t->has_raw_data ? t->raw_data.len / (size_t)es : have);
}

/* The ONNX name of a dtype code ("float", "int64"...), for messages and the translator. */
const char *onnx_dtype_name(int dt) {
  static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                      "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
                                      "complex128", "bfloat16"};
  return dt >= 0 && dt < (int)(sizeof names / sizeof *names) ? names[dt] : "unknown";
}

/* Registers t (checked) in m->tensors and returns its id. */
static int add_tensor(OnnxModel *m, const Onnx__TensorProto *t) {
  check_tensor(m, t);
  if (m->ntensors == m->captensors) {
    int cap = m->captensors ? 2 * m->captensors : 64;
    const Onnx__TensorProto **nt = kiln_alloc(sizeof *nt * (size_t)cap);
    if (m->ntensors) memcpy(nt, m->tensors, sizeof *nt * (size_t)m->ntensors);
    m->tensors = nt;
    m->captensors = cap;
  }
  m->tensors[m->ntensors] = t;
  return m->ntensors++;
}

/* Pushes {name=, dtype=, dims=, id=, values=} for tensor t. */
static void push_tensor(lua_State *L, OnnxModel *m, const Onnx__TensorProto *t) {
  int id = add_tensor(m, t);
  int64_t n = tensor_numel(m, t);
  lua_createtable(L, 0, 5);
  lua_pushstring(L, t->name ? t->name : "");
  lua_setfield(L, -2, "name");
  lua_pushinteger(L, t->data_type);
  lua_setfield(L, -2, "dtype");
  lua_createtable(L, (int)t->n_dims, 0);
  for (size_t i = 0; i < t->n_dims; i++) {
    lua_pushinteger(L, t->dims[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "dims");
  lua_pushinteger(L, id);
  lua_setfield(L, -2, "id");
  if (n <= ONNX_LUA_VALUES_MAX) {
    lua_createtable(L, (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
      if (t->data_type == OT_FLOAT || t->data_type == OT_DOUBLE || t->data_type == OT_FLOAT16 ||
          t->data_type == OT_BFLOAT16)
        lua_pushnumber(L, onnx_tensor_f64(t, i));
      else lua_pushinteger(L, tensor_i64(t, i));
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "values");
  }
}

/* Pushes an array of the strings s[0..n). */
static void push_strings(lua_State *L, char **s, size_t n) {
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, s[i] ? s[i] : "");
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* Pushes {kind=, v=} for attribute a: kind "f" "i" "s" "t" "g" "floats" "ints" "strings"
 * (or the ONNX type number as a string for kinds the translator refuses). */
static void push_attr(lua_State *L, OnnxModel *m, const Onnx__AttributeProto *a) {
  lua_createtable(L, 0, 2);
  const char *kind;
  switch (a->type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: kind = "f"; lua_pushnumber(L, a->f); break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: kind = "i"; lua_pushinteger(L, a->i); break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: kind = "s"; lua_pushlstring(L, (const char *)a->s.data, a->s.len); break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
    kind = "t";
    if (!a->t) onnx_fail(m, "%s: attribute '%s' says tensor and holds none", m->file, shown(a->name));
    push_tensor(L, m, a->t);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    kind = "floats";
    lua_createtable(L, (int)a->n_floats, 0);
    for (size_t i = 0; i < a->n_floats; i++) { lua_pushnumber(L, a->floats[i]); lua_rawseti(L, -2, (lua_Integer)i + 1); }
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    kind = "ints";
    lua_createtable(L, (int)a->n_ints, 0);
    for (size_t i = 0; i < a->n_ints; i++) { lua_pushinteger(L, a->ints[i]); lua_rawseti(L, -2, (lua_Integer)i + 1); }
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    kind = "strings";
    lua_createtable(L, (int)a->n_strings, 0);
    for (size_t i = 0; i < a->n_strings; i++) {
      lua_pushlstring(L, (const char *)a->strings[i].data, a->strings[i].len);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    kind = "g"; lua_pushboolean(L, 1); break;
  default:
    kind = "other"; lua_pushinteger(L, a->type); break;
  }
  lua_setfield(L, -2, "v");
  lua_pushstring(L, kind);
  lua_setfield(L, -2, "kind");
}

/* Pushes the node table (see the header comment). */
static void push_node(lua_State *L, OnnxModel *m, const Onnx__NodeProto *n) {
  lua_createtable(L, 0, 6);
  lua_pushstring(L, n->op_type ? n->op_type : "");
  lua_setfield(L, -2, "op");
  lua_pushstring(L, n->domain ? n->domain : "");
  lua_setfield(L, -2, "domain");
  lua_pushstring(L, n->name ? n->name : "");
  lua_setfield(L, -2, "name");
  push_strings(L, n->input, n->n_input);
  lua_setfield(L, -2, "inputs");
  push_strings(L, n->output, n->n_output);
  lua_setfield(L, -2, "outputs");
  lua_createtable(L, 0, (int)n->n_attribute);
  for (size_t i = 0; i < n->n_attribute; i++) {
    const Onnx__AttributeProto *a = n->attribute[i];
    if (!a->name || !*a->name) onnx_fail(m, "%s: node '%s' (%s): an attribute without a name", m->file, shown(n->name), shown(n->op_type));
    push_attr(L, m, a);
    lua_setfield(L, -2, a->name);
  }
  lua_setfield(L, -2, "attrs");
}

/* Pushes {name=, dtype=, dims=} for a graph input or output; only tensor types are
 * accepted (sequences, maps, optionals are refused here, naming the value). */
static void push_value_info(lua_State *L, const OnnxModel *m, const Onnx__ValueInfoProto *v) {
  const Onnx__TypeProto *t = v->type;
  if (t && !t->tensor_type && (t->has_sequence_type || t->has_map_type || t->has_sparse_tensor_type || t->has_optional_type))
    onnx_fail(m, "%s: graph value '%s' is not a dense tensor (sequence, map, sparse or optional): not supported", m->file, shown(v->name));
  lua_createtable(L, 0, 3);
  lua_pushstring(L, v->name ? v->name : "");
  lua_setfield(L, -2, "name");
  const Onnx__TypeProto__Tensor *tt = t ? t->tensor_type : NULL;
  lua_pushinteger(L, tt ? tt->elem_type : 0);
  lua_setfield(L, -2, "dtype");
  if (tt && tt->shape) {
    lua_createtable(L, (int)tt->shape->n_dim, 0);
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
      const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
      if (d->has_dim_value) lua_pushinteger(L, d->dim_value);
      else lua_pushstring(L, d->dim_param && *d->dim_param ? d->dim_param : "?");
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "dims");
  }
}

/* The default domain's opset version (1..17, checked; 0 when the model imports only
 * ai.onnx.preview.training 1), or a user error. */
static int64_t default_opset(const OnnxModel *m) {
  const Onnx__ModelProto *mp = m->proto;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
    if (!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) {
      /* 7..17 is the range Kiln targets; older files import where each op reads the same
       * (an attribute only older versions had is refused by the translator). */
      if (o->version < 1 || o->version > 17)
        onnx_fail(m, "%s: opset %lld of the default domain is not supported (Kiln imports opsets up to 17)", m->file,
                   (long long)o->version);
      return o->version;
    }
  }
  /* a model of only ONNX's training ops (Adagrad, Adam, Momentum) needs no default
   * domain: 0, and the translator refuses any default-domain node in it */
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = mp->opset_import[i];
    if (o->domain && strcmp(o->domain, "ai.onnx.preview.training") == 0 && o->version == 1) return 0;
  }
  onnx_fail(m, "%s: the model imports no opset of the default ONNX domain: other domains are not supported", m->file);
}

/* Contract: reports a problem with the model: one line "file: message", through
 * kiln_error (the command exits), or, when m->escape is set (the fuzz harness), copied
 * to m->errbuf before a longjmp to *m->escape. */
void onnx_fail(const OnnxModel *m, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!m->escape) kiln_error("%s", esc_message(msg));
  snprintf(m->errbuf, m->errlen, "%s", esc_message(msg));
  longjmp(*m->escape, 1);
}

/* Contract: reads and decodes path into m (m->proto set); a file that is not a
 * protobuf ONNX model, or has no graph, is the user's error in one line. */
void onnx_read(OnnxModel *m, const char *path) {
  char err[1024];
  size_t size;
  unsigned char *data = kiln_read_bounded(path, (size_t)1 << 31, &size, err, sizeof err);
  if (!data) onnx_fail(m, "%s", err);
  onnx_decode(m, data, size);
}

/* Contract: decodes the size bytes at data (copied: data may go afterwards) into m. */
void onnx_decode(OnnxModel *m, const unsigned char *data, size_t size) {
  m->proto = onnx__model_proto__unpack(NULL, size, data);
  if (!m->proto) onnx_fail(m, "%s: not an ONNX model: the protobuf does not decode (truncated or malformed file)", m->file);
  if (!m->proto->graph) onnx_fail(m, "%s: the model has no graph", m->file);
  if (!m->proto->graph->n_node) onnx_fail(m, "%s: the graph has no nodes", m->file);
  if (m->proto->graph->n_sparse_initializer) onnx_fail(m, "%s: sparse initializers are not supported", m->file);
}

/* Contract: pushes the model table described in the header comment onto L's stack. */
void onnx_push_model(lua_State *L, OnnxModel *m) {
  const Onnx__GraphProto *g = m->proto->graph;
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, default_opset(m));
  lua_setfield(L, -2, "opset");
  lua_pushstring(L, g->name ? g->name : "");
  lua_setfield(L, -2, "name");
  lua_createtable(L, (int)g->n_initializer, 0);
  for (size_t i = 0; i < g->n_initializer; i++) {
    push_tensor(L, m, g->initializer[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "inits");
  lua_createtable(L, (int)g->n_input, 0);
  for (size_t i = 0; i < g->n_input; i++) {
    push_value_info(L, m, g->input[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "inputs");
  lua_createtable(L, (int)g->n_output, 0);
  for (size_t i = 0; i < g->n_output; i++) {
    push_value_info(L, m, g->output[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "outputs");
  lua_createtable(L, (int)g->n_node, 0);
  for (size_t i = 0; i < g->n_node; i++) {
    push_node(L, m, g->node[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "nodes");
}

/* Contract: pushes the tensor decoded from a TensorProto file (what the ONNX tests'
 * input_N.pb files are) as push_tensor does; used by --freeze. */
void onnx_push_tensor_file(lua_State *L, OnnxModel *m, const char *path) {
  char err[1024];
  size_t size;
  unsigned char *data = kiln_read_bounded(path, (size_t)1 << 31, &size, err, sizeof err);
  if (!data) onnx_fail(m, "%s", err);
  Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, size, data);
  if (!t) onnx_fail(m, "%s: not an ONNX TensorProto: the protobuf does not decode", path);
  if (m->nfrozen == (int)(sizeof m->frozen / sizeof *m->frozen)) die("more --freeze files than the parser allows");
  m->frozen[m->nfrozen++] = t;      /* freed by onnx_free */
  push_tensor(L, m, t);
}

/* Contract: tensor id's data as float32 (float tensors only; the translator writes only
 * those as parameters). */
void onnx_tensor_to_f32(const OnnxModel *m, int id, float *out, int64_t n) {
  const Onnx__TensorProto *t = m->tensors[id];
  if (t->data_type != OT_FLOAT) die("tensor %d is %s, not float", id, onnx_dtype_name(t->data_type));
  for (int64_t i = 0; i < n; i++) out[i] = (float)onnx_tensor_f64(t, i);
}

/* The element count of tensor id (checked when it was registered). */
int64_t onnx_tensor_numel(const OnnxModel *m, int id) { return tensor_numel(m, m->tensors[id]); }

/* Frees what protobuf-c allocated for m (the model and the --freeze tensors). */
void onnx_free(OnnxModel *m) {
  if (m->proto) onnx__model_proto__free_unpacked(m->proto, NULL);
  for (int i = 0; i < m->nfrozen; i++) onnx__tensor_proto__free_unpacked(m->frozen[i], NULL);
  m->proto = NULL;
  m->nfrozen = 0;
}
