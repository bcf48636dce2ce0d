"""sem_check.py make DIR | check DIR — inputs for sem.lua, then its outputs (kiln run
--save DIR/out) against numpy/torch. Prints one "PASS frontend/sem/<name>" or
"FAIL ..." line per output. Tolerance: 1e-5 absolute + relative (float32 ops whose
order of summation may differ); shapes must match exactly."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import init_ref  # noqa: E402

mode, d = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(5)
x = rng.standard_normal((2, 3, 4)).astype(np.float32)
v = rng.standard_normal(4).astype(np.float32)
y = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
if mode == "make":
    for n, a in (("x", x), ("v", v), ("y", y)):
        np.save(os.path.join(d, n + ".npy"), a)
    sys.exit(0)


def param(name, shape):
    return np.array(init_ref.values(3, name, "uniform", -1.0, 1.0, int(np.prod(shape))), dtype=np.float32).reshape(shape)


t = torch.from_numpy
expect = {
    "s1": x[:, :, 1:], "s2": x[:, ::2], "s3": x[0:1], "r1": x.reshape(-1, 4),
    "m1": np.matmul(v, x.transpose(0, 2, 1)), "m2": np.matmul(x, v), "m3": np.array(np.dot(v, v)),
    "m4": np.matmul(x, x.transpose(0, 2, 1)), "f1": x.reshape(2, 12), "f2": x.reshape(6, 4),
    "p1": x.transpose(2, 0, 1), "su": x.sum(axis=(2, 0), keepdims=True), "me": x.mean(axis=1),
    "am": np.array(x.max()), "sm": torch.softmax(t(x), -1).numpy(), "ch": x[..., 2:4],
    "st": np.stack([v, v * 2], -1), "us": x[..., None], "cc": np.concatenate([x, x * 2], -2),
    "wh": np.where(x > 0, x, np.float32(0.5)), "ar": 1 - x ** 2 / 2 + (-x),
    "cn": np.array([[1, 2], [3, 4]], dtype=np.float32), "ga": np.take(x, [2, 0, 2], axis=-1),
    "em": x.reshape(6, 4)[np.array([[5, 0]])],
    "lin": param("lw", (3, 4)) @ v + param("lb", (3,)),
    "cv": F.conv2d(F.pad(t(y), (1, 2, 1, 2)), t(param("cw", (3, 2, 4, 4)))).numpy(),
    "ap": F.avg_pool2d(t(y), 3, 2, 1, count_include_pad=False).numpy(),
    "mp": F.max_pool2d(t(y), 2).numpy(),
    "gt": F.gelu(t(x), approximate="tanh").numpy(),
    "ln": F.layer_norm(t(x), (3, 4)).numpy(),
    "ca": np.trunc(x).astype(np.int32),
}
for name, want in sorted(expect.items()):
    path = os.path.join(d, "out", name + ".npy")
    if not os.path.exists(path):
        print("FAIL frontend/sem/%s: no output %s" % (name, path))
        continue
    got = np.load(path)
    want = np.asarray(want)
    if got.shape != want.shape:
        print("FAIL frontend/sem/%s: shape %s, expected %s" % (name, got.shape, want.shape))
    elif got.dtype != want.dtype and not (got.dtype == np.float32 and want.dtype == np.float64):
        print("FAIL frontend/sem/%s: dtype %s, expected %s" % (name, got.dtype, want.dtype))
    elif not np.allclose(got, want, rtol=1e-5, atol=1e-5):
        err = np.max(np.abs(got.astype(np.float64) - want))
        print("FAIL frontend/sem/%s: max abs error %g" % (name, err))
    else:
        print("PASS frontend/sem/%s" % name)
