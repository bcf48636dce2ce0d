"""torch_cnn.py OUT_DIR — a small CNN (and a GRU/LSTM network, torch_rnn, and a transformer
encoder layer with dynamic batch and sequence dims, torch_transformer) defined in
PyTorch, exported with torch.onnx.export, written as cases in the layout of ONNX's node
tests (OUT_DIR/torch_cnn/model.onnx, test_data_set_N/input_0.pb, output_0.pb) so
run_node.py imports, builds and checks them like any other case.

The expected outputs are the same network evaluated by PyTorch in float64 (the exported
float32 weights, widened), so they carry no float32 rounding of their own: the tolerance
(run_node.py, "model": 1e-4 of the output scale) is about Kiln's float32 alone. The batch
dim is exported as dynamic ("batch"), so the import needs -D batch=N, which the runner
derives from the test input, and two data sets run. Seeded: the same file every run.
"""
import os
import sys

import torch
from onnx import numpy_helper


class SmallCNN(torch.nn.Module):
    """Conv/BN/ReLU blocks, max and average pooling, a residual add, a grouped and a
    dilated conv, global pooling, flatten, linear layers, GELU-free activations and a
    log-softmax: the layers a small vision model exports."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(16)
        self.conv3 = torch.nn.Conv2d(16, 16, 3, padding=2, dilation=2, groups=4)
        self.pool = torch.nn.MaxPool2d(2)
        self.avg = torch.nn.AvgPool2d(2)
        self.fc1 = torch.nn.Linear(16 * 2 * 2, 32)
        self.fc2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.pool(x)
        y = torch.nn.functional.hardswish(self.bn2(self.conv2(x)))
        y = y + torch.sigmoid(self.conv3(y)) * y
        y = self.avg(y)
        y = torch.flatten(y, 1)
        y = torch.nn.functional.leaky_relu(self.fc1(y), 0.1)
        return torch.log_softmax(self.fc2(y), dim=1)


class SmallRNN(torch.nn.Module):
    """A bidirectional GRU feeding an LSTM, then a linear layer on the last step: ONNX's
    GRU (linear_before_reset, both directions) and LSTM as PyTorch exports them."""

    def __init__(self):
        super().__init__()
        self.gru = torch.nn.GRU(8, 6, batch_first=True, bidirectional=True)
        self.lstm = torch.nn.LSTM(12, 5, batch_first=True)
        self.fc = torch.nn.Linear(5, 3)

    def forward(self, x):
        y, _ = self.gru(x)
        y, _ = self.lstm(y)
        return self.fc(y[:, -1])


class SmallTransformer(torch.nn.Module):
    """A post-norm encoder layer (multi-head attention, feed-forward) and a layer norm,
    exported with dynamic batch and sequence dims: the export computes every reshape's
    target from Shape -> Gather -> Unsqueeze -> Concat chains, which the import folds."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        return self.norm(self.layer(x))


def export(model, name, shape, dynamic, root):
    """Writes root/name/model.onnx and two data sets with float64 PyTorch's outputs;
    dynamic maps input dims to dim_param names (the runner gives them with -D)."""
    out = os.path.join(root, name)
    os.makedirs(out, exist_ok=True)
    model.eval()
    x0 = torch.randn(*shape)
    axes = {"input": dynamic, "output": dynamic} if dynamic else None
    torch.onnx.export(model, x0, os.path.join(out, "model.onnx"), input_names=["input"], output_names=["output"],
                      dynamic_axes=axes, opset_version=14)
    ref = model.double()
    for s, x in enumerate([x0, torch.randn(*shape) * 2]):
        d = os.path.join(out, f"test_data_set_{s}")
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            y = ref(x.double()).float()
        with open(os.path.join(d, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x.numpy(), "input").SerializeToString())
        with open(os.path.join(d, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y.numpy(), "output").SerializeToString())


def main():
    torch.manual_seed(1)
    export(SmallRNN(), "torch_rnn", (2, 7, 8), None, sys.argv[1])
    export(SmallTransformer(), "torch_transformer", (2, 5, 16), {0: "batch", 1: "seq"}, sys.argv[1])
    out = os.path.join(sys.argv[1], "torch_cnn")
    torch.manual_seed(0)
    model = SmallCNN()
    with torch.no_grad():                          # non-trivial running statistics
        for bn in (model.bn1, model.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    model.eval()
    os.makedirs(out, exist_ok=True)
    x0 = torch.randn(2, 3, 16, 16)
    torch.onnx.export(model, x0, os.path.join(out, "model.onnx"), input_names=["image"], output_names=["logprobs"],
                      dynamic_axes={"image": {0: "batch"}, "logprobs": {0: "batch"}}, opset_version=13)
    ref = model.double()
    for s, x in enumerate([x0, torch.randn(2, 3, 16, 16) * 2]):
        d = os.path.join(out, f"test_data_set_{s}")
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            y = ref(x.double()).float()
        with open(os.path.join(d, "input_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(x.numpy(), "image").SerializeToString())
        with open(os.path.join(d, "output_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y.numpy(), "logprobs").SerializeToString())


if __name__ == "__main__":
    main()
