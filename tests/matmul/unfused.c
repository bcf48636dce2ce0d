/* unfused.c — the control of tests/t_isa.sh: a stand-in for fmaf that rounds the product
 * before the sum. A model compiled with -DKILN_SCALAR -Dfmaf=kiln_unfused_fmaf runs its
 * matmul chains through this, and its outputs must differ from every real build's. */
float kiln_unfused_fmaf(float a, float b, float c);
float kiln_unfused_fmaf(float a, float b, float c) { return a * b + c; }
