"""textdir.py KILN WORK [--write-input FILE] — a trained third-party model on real data:
PaddleOCR's text-direction classifier (ch_ppocr_mobile_v2.0_cls_infer.onnx, README.md
here) on 240 text-line images (textdir.npz, make_textdir.py: 120 lines upright, the same
120 rotated by 180 degrees; classes 0 and 180).

1. Lays the model and the 240 images out as an ONNX test case (model.onnx,
   test_data_set_0/input_0.pb, output_0.pb = ONNX Runtime's outputs, textdir_ort.npy) and
   runs tests/onnx/run_node.py on it (a kiln command may take 300 s: the interpreter alone
   takes about 30 s on a quiet machine, and make test runs two suites at once): `kiln
   import`, the interpreter and the generated C
   against ONNX Runtime, element by element, within the "model" bound (1e-4; these are
   probabilities in [0, 1]).
2. Accuracy: the generated C's and the interpreter's predicted classes against the labels,
   next to ONNX Runtime's, which must match it on every image (and be at least 95%, so a
   mislaid label or a broken preprocessing fails here rather than agreeing on garbage).

--write-input FILE writes the preprocessed batch as raw float32 [240, 3, 48, 192] for
ort_ref.mjs (how textdir_ort.npy was made). Prints PASS/FAIL lines.
"""
import os
import subprocess
import sys

import numpy as np
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "ch_ppocr_mobile_v2.0_cls_infer.onnx"


def batch():
    """The [240, 3, 48, 192] input and the labels (0 upright, 1 rotated), as PaddleOCR's
    classifier preprocesses: pixels to [-1, 1] ((x / 255 - 0.5) / 0.5), the same grey in
    the three channels, zeros right of the line's width (its padding after normalising)."""
    d = np.load(os.path.join(HERE, "textdir.npz"))
    im, widths = d["images"].astype(np.float32), d["widths"]
    rot = np.full_like(im, 255)
    for i, w in enumerate(widths):
        rot[i, :, :w] = im[i, ::-1, :w][:, ::-1]          # the line turned by 180 degrees
    x = (np.concatenate([im, rot]) / 255 - 0.5) / 0.5
    for i, w in enumerate(np.concatenate([widths, widths])):
        x[i, :, w:] = 0
    labels = np.r_[np.zeros(len(im), np.int64), np.ones(len(im), np.int64)]
    return np.ascontiguousarray(np.repeat(x[:, None], 3, axis=1), np.float32), labels


def main():
    x, labels = batch()
    if "--write-input" in sys.argv:
        x.tofile(sys.argv[sys.argv.index("--write-input") + 1])
        return
    kbin, work = sys.argv[1], sys.argv[2]
    case = os.path.join(work, "cases", "test_textdir")
    os.makedirs(os.path.join(case, "test_data_set_0"), exist_ok=True)
    with open(os.path.join(HERE, MODEL), "rb") as f, open(os.path.join(case, "model.onnx"), "wb") as g:
        g.write(f.read())
    ort = np.load(os.path.join(HERE, "textdir_ort.npy"))
    for name, a in (("input_0", x), ("output_0", ort)):
        with open(os.path.join(case, "test_data_set_0", name + ".pb"), "wb") as f:
            f.write(numpy_helper.from_array(a).SerializeToString())
    run = os.path.join(work, "run")
    os.makedirs(run, exist_ok=True)
    p = subprocess.run([sys.executable, os.path.join(HERE, "..", "run_node.py"), kbin, os.path.join(work, "cases"), run,
                        "--label", "real", "--timeout", "300"], capture_output=True, text=True)
    print("\n".join(l for l in p.stdout.splitlines() if not l.startswith("onnx node tests")))
    if p.returncode != 0 or not p.stdout.startswith("PASS"):
        print(f"FAIL onnx/real/textdir_accuracy: the case did not run through ({p.stderr.strip()[-200:]})")
        return
    d = os.path.join(run, "o0")
    interp = np.load(os.path.join(d, "interp0", os.listdir(os.path.join(d, "interp0"))[0]))
    c = np.fromfile(os.path.join(d, "c0_0.bin"), np.float32).reshape(interp.shape)
    n = len(labels)
    acc = {k: int(np.sum(v.argmax(1) == labels)) for k, v in (("C", c), ("interp", interp), ("ort", ort))}
    why = ""
    if acc["ort"] < 0.95 * n:
        why = f"ONNX Runtime's accuracy {acc['ort']}/{n} is below 95%: the data or labels are wrong"
    elif np.any(c.argmax(1) != ort.argmax(1)) or np.any(interp.argmax(1) != ort.argmax(1)):
        why = "a predicted class differs from ONNX Runtime's"
    status = "FAIL" if why else "PASS"
    print(f"{status} onnx/real/textdir_accuracy{': ' + why if why else ''} (generated C {acc['C']}/{n}, interpreter "
          f"{acc['interp']}/{n}, ONNX Runtime {acc['ort']}/{n}; max |C - ORT| {float(np.max(np.abs(c - ort))):.2g})")


if __name__ == "__main__":
    main()
