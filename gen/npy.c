/*
 * npy.c — NumPy's .npy files: reading an input for `kiln run`, writing an output for
 * `kiln run --save`. Only what Kiln's dtypes need: little-endian f32 ('<f4'), i32
 * ('<i4'), i64 ('<i8', inputs only) and bool ('|b1'), C order, format versions 1 to 3. The reader works on
 * bytes in memory and reports problems as messages instead of exiting, so a fuzz
 * harness (tests/robust/fuzz_npy.c) can drive it.
 */
#include "kiln.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Writes "fmt..." to err and makes the function return NULL. */
#define NPY_FAIL(...) return snprintf(err, errlen, __VA_ARGS__), (unsigned char *)NULL

/* The text after "'key':" (and spaces) in a .npy header dict, or NULL. */
static const char *npy_field(const char *hdr, const char *key) {
  const char *p = strstr(hdr, kiln_fmt("'%s':", key));
  if (!p) return NULL;
  p += strlen(key) + 3;
  while (*p == ' ') p++;
  return p;
}

/* The shape tuple at p ("(2, 3)", "(6,)", "()") into s; false if malformed or rank > max. */
static bool npy_shape(const char *p, Shape *s) {
  *s = (Shape){0};
  if (*p++ != '(') return false;
  for (;;) {
    while (*p == ' ') p++;
    if (*p == ')') return true;
    if (*p < '0' || *p > '9' || s->rank == KILN_MAX_RANK) return false;
    char *end;
    errno = 0;
    long long d = strtoll(p, &end, 10);
    if (errno) return false;
    s->dim[s->rank++] = d;
    p = end;
    while (*p == ' ') p++;
    if (*p == ',') p++;
    else if (*p != ')') return false;
  }
}

/* A header for a message: at most 160 bytes, through esc_message (control bytes and
 * invalid UTF-8 shown as '?', so the message stays one clean line), trailing padding
 * and newline dropped. */
static const char *one_line_hdr(const char *hdr) {
  char *s = esc_message(kiln_fmt("%.160s", hdr));
  for (size_t n = strlen(s); n && (s[n - 1] == ' ' || s[n - 1] == '?'); n--) s[n - 1] = 0;
  return s;
}

/* Contract (kiln.h): checks a .npy file's header and returns its data: version 1..3, a
 * dict with the dtype wanted ('<f4', '<i4', '<i8', '|b1'), C order, exactly shape, and exactly
 * the bytes that shape holds. On any problem returns NULL with a one-line message
 * naming path (and iname, the input it is for) in err; never reads outside all. */
unsigned char *npy_parse(const char *path, const char *iname, DType dtype, const Shape *shape, unsigned char *all,
                         size_t size, char *err, size_t errlen) {
  if (size < 10 || all[6] < 1 || all[6] > 3) NPY_FAIL("%s: not a .npy file of version 1, 2 or 3", path);
  size_t pre = all[6] == 1 ? 10 : 12;
  if (size < pre) NPY_FAIL("%s: truncated .npy header", path);
  size_t hlen = all[6] == 1 ? (size_t)(all[8] | all[9] << 8)
                            : (size_t)all[8] | (size_t)all[9] << 8 | (size_t)all[10] << 16 | (size_t)all[11] << 24;
  if (hlen > size - pre) NPY_FAIL("%s: truncated .npy header", path);
  char *hdr = kiln_alloc(hlen + 1);
  memcpy(hdr, all + pre, hlen);
  if (strlen(hdr) != hlen) NPY_FAIL("%s: .npy header contains a NUL byte", path);
  int64_t bytes = shape_numel(shape) * dtype_size(dtype);
  const char *want = dtype == DT_F32 ? "'<f4'" : dtype == DT_I32 ? "'<i4'" : dtype == DT_I64 ? "'<i8'" : "'|b1'";
  const char *descr = npy_field(hdr, "descr"), *fortran = npy_field(hdr, "fortran_order"), *shp = npy_field(hdr, "shape");
  Shape s;
  if (!descr || !fortran || !shp || !npy_shape(shp, &s)) NPY_FAIL("%s: malformed .npy header %s", path, one_line_hdr(hdr));
  if (strncmp(descr, want, strlen(want)) != 0)
    NPY_FAIL("%s: --input %s is %s, which .npy spells %s; the file holds %s", path, iname, dtype_name(dtype), want,
               one_line_hdr(kiln_fmt("%.*s", (int)strcspn(descr, ",}"), descr)));
  if (strncmp(fortran, "False", 5) != 0) NPY_FAIL("%s: Fortran-order arrays are not supported (save a C-order copy)", path);
  if (!shape_eq(&s, shape))
    NPY_FAIL("%s: --input %s is %s %s, the file holds shape %s", path, iname, dtype_name(dtype), shape_str(shape),
               shape_str(&s));
  if ((int64_t)(size - pre - hlen) != bytes)
    NPY_FAIL("%s: --input %s %s needs %lld bytes of data, the file has %lld", path, iname, shape_str(shape),
               (long long)bytes, (long long)(size - pre - hlen));
  return all + pre + hlen;
}

/* Writes t as dir/<name>.npy (format 1.0: little-endian <f4/<i4 or |b1, C order, header
 * padded to 64 bytes), readable by numpy.load. name must already be a safe file name. */
void npy_write(const char *dir, const char *name, const Tensor *t) {
  Buf b = {0};
  char hdr[256];
  char shp[200] = "";
  size_t k = 0;
  for (int i = 0; i < t->shape.rank; i++)
    k += (size_t)snprintf(shp + k, sizeof shp - k, "%lld,%s", (long long)t->shape.dim[i], t->shape.rank > 1 && i < t->shape.rank - 1 ? " " : "");
  const char *descr = t->dtype == DT_F32 ? "<f4" : t->dtype == DT_I32 ? "<i4" : "|b1";
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shp);
  int total = 10 + n + 1;
  int pad = (64 - total % 64) % 64;
  buf_put(&b, "\x93NUMPY\x01\x00", 8);
  unsigned hl = (unsigned)(n + pad + 1);
  unsigned char hb[2] = {(unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
  buf_put(&b, hb, 2);
  buf_put(&b, hdr, (size_t)n);
  for (int i = 0; i < pad; i++) buf_puts(&b, " ");
  buf_puts(&b, "\n");
  buf_put(&b, t->data, (size_t)(shape_numel(&t->shape) * dtype_size(t->dtype)));
  kiln_write_file(dir, kiln_fmt("%s.npy", name), b.data, b.len);
  buf_free(&b);
}

