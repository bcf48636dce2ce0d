#!/usr/bin/python3
"""train_mlp.py — trains Kiln's demo model and writes its committed artefacts.

The demo model is models/mlp.lua: an MLP 784-512-512-10 (Linear, ReLU) over a
Fashion-MNIST image flattened to [1, 784] with pixels scaled to [0, 1]. This
script trains the same network with PyTorch on the copy of Fashion-MNIST that
Debian ships (package `dataset-fashion-mnist`, MIT/Expat licence, files under
/usr/share/datasets/fashion-mnist) and writes:

  models/weights/mlp_fashion.safetensors   the trained weights, f16, PyTorch
                                           state_dict names ("0.weight", ...)
  models/data/fashion_test_1000.images.npy the first 1000 test images, uint8 [1000, 28, 28]
  models/data/fashion_test_1000.labels.npy their labels, uint8 [1000]
  models/weights/mlp_fashion.txt           what was measured: accuracies, hashes

It is run once by hand (`make` never runs it): its outputs are committed, so a
fresh clone needs neither the data set nor training. Everything is seeded and the
run uses one thread, so a rerun on the same software gives the same numbers
(`--out DIR` writes the files under DIR instead, to check that without touching
the committed ones). It takes about 10-15 minutes on one core.

The safetensors file is written by hand (8-byte little-endian header length,
JSON header, raw little-endian tensor bytes) to show how small the format is and
to need no extra package. Run: /usr/bin/python3 scripts/train_mlp.py
"""
import argparse
import gzip
import hashlib
import json
import os
import struct
import sys
import time

import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WEIGHTS = "models/weights/mlp_fashion.safetensors"
REPORT = "models/weights/mlp_fashion.txt"
SAMPLE_IMAGES = "models/data/fashion_test_1000.images.npy"
SAMPLE_LABELS = "models/data/fashion_test_1000.labels.npy"
SEED = 20240601
EPOCHS = 12
BATCH = 128
LR = 1e-3
NSAMPLE = 1000


def read_idx(name):
    """Returns the uint8 array in one gzipped IDX file of the data set."""
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def sha256_file(path):
    """Returns the hex SHA-256 of a file's bytes."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_model():
    """The network of models/mlp.lua, with the same state_dict names."""
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(),
                         nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def accuracy(model, x, y):
    """Fraction of rows of x (f32 [N, 784]) whose arg-max logit equals y."""
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def train(xtr, ytr):
    """Trains make_model() with Adam on (xtr, ytr); seeded, one thread."""
    torch.manual_seed(SEED)
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, EPOCHS)
    gen = torch.Generator().manual_seed(SEED)
    lossf = nn.CrossEntropyLoss()
    for epoch in range(EPOCHS):
        model.train()
        perm = torch.randperm(len(xtr), generator=gen)
        total = 0.0
        for i in range(0, len(xtr), BATCH):
            idx = perm[i:i + BATCH]
            opt.zero_grad()
            loss = lossf(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        sched.step()
        print(f"epoch {epoch + 1}/{EPOCHS}: loss {total / len(xtr):.4f}", flush=True)
    model.eval()
    return model


def write_safetensors(path, tensors, meta):
    """Writes {name: f16 numpy array} as a safetensors file, names sorted.

    Layout: u64 LE header length, header JSON (padded with spaces to a multiple
    of 8 so the data starts aligned), then each tensor's bytes back to back.
    """
    header, blobs, off = {"__metadata__": meta}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name].astype("<f2"))
        b = a.tobytes()
        header[name] = {"dtype": "F16", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_npy(path, a):
    """np.save without pickling, the same bytes on every run."""
    np.save(path, np.ascontiguousarray(a), allow_pickle=False)


def main():
    ap = argparse.ArgumentParser(description="Train Kiln's demo MLP on Fashion-MNIST.")
    ap.add_argument("--out", default=ROOT, help="root to write models/... under (default: the repo; "
                    "another directory to check reproducibility without touching the committed files)")
    out = ap.parse_args().out
    weights, report = os.path.join(out, WEIGHTS), os.path.join(out, REPORT)
    sample_images, sample_labels = os.path.join(out, SAMPLE_IMAGES), os.path.join(out, SAMPLE_LABELS)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    xtr8, ytr8 = read_idx("train-images-idx3-ubyte.gz"), read_idx("train-labels-idx1-ubyte.gz")
    xte8, yte8 = read_idx("t10k-images-idx3-ubyte.gz"), read_idx("t10k-labels-idx1-ubyte.gz")
    to_x = lambda a: torch.from_numpy(a.reshape(len(a), 784).astype(np.float32) / 255.0)
    xtr, ytr = to_x(xtr8), torch.from_numpy(ytr8.astype(np.int64))
    xte, yte = to_x(xte8), torch.from_numpy(yte8.astype(np.int64))

    t0 = time.time()
    model = train(xtr, ytr)
    seconds = time.time() - t0
    acc32 = accuracy(model, xte, yte)
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}

    # What Kiln sees: the f16 weights widened back to f32.
    half = make_model()
    half.load_state_dict({k: torch.from_numpy(v.astype(np.float16).astype(np.float32)) for k, v in sd.items()})
    half.eval()
    acc16 = accuracy(half, xte, yte)
    acc16_sample = accuracy(half, xte[:NSAMPLE], yte[:NSAMPLE])

    os.makedirs(os.path.dirname(weights), exist_ok=True)
    os.makedirs(os.path.dirname(sample_images), exist_ok=True)
    write_safetensors(weights, sd, {"model": "mlp 784-512-512-10", "dataset": "fashion-mnist",
                                    "trained_by": "scripts/train_mlp.py", "seed": str(SEED)})
    write_npy(sample_images, xte8[:NSAMPLE])
    write_npy(sample_labels, yte8[:NSAMPLE])

    lines = [
        "mlp_fashion: made by scripts/train_mlp.py (run: /usr/bin/python3 scripts/train_mlp.py)",
        f"torch {torch.__version__}, numpy {np.__version__}, python {sys.version.split()[0]}, 1 thread",
        f"seed {SEED}, Adam lr {LR} cosine over {EPOCHS} epochs, batch {BATCH}, input pixels / 255",
        f"training time: {seconds:.0f} s",
        f"test accuracy, f32 weights, 10000 images: {acc32 * 100:.2f}%",
        f"test accuracy, f16 weights (as committed), 10000 images: {acc16 * 100:.2f}%",
        f"test accuracy, f16 weights, bundled first {NSAMPLE} images: {acc16_sample * 100:.2f}%",
        "data set files (sha256):",
    ]
    for n in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
              "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        lines.append(f"  {sha256_file(os.path.join(DATA, n))}  {n}")
    lines.append("outputs (sha256):")
    for p in (weights, sample_images, sample_labels):
        lines.append(f"  {sha256_file(p)}  {os.path.relpath(p, out)}")
    with open(report, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
