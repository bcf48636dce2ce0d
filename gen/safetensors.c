/* STUB: placeholder until this phase is written. */
#include "kiln.h"

SafeFile *safetensors_load(const char *path, char *err, size_t errlen) { (void)path; (void)err; (void)errlen; die("not written yet"); }
SafeTensor *safetensors_find(SafeFile *f, const char *name) { (void)f; (void)name; die("not written yet"); }
