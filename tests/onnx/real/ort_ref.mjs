// ort_ref.mjs MODEL INPUT.bin N OUT.bin — ONNX Runtime's outputs for textdir.py's batch
// (raw float32 [N, 3, 48, 192] from `textdir.py - - --write-input INPUT.bin`), written raw
// float32 [N, 2]; textdir_ort.npy is that file as .npy. Run with npm's onnxruntime-web 1.30.0
// (WebAssembly CPU backend, one thread) installed beside it: Kiln's test then needs neither
// node nor ONNX Runtime. README.md gives the commands.
import * as ort from 'onnxruntime-web';
import fs from 'fs';
const [model, inp, n, out] = process.argv.slice(2);
ort.env.wasm.numThreads = 1;
const s = await ort.InferenceSession.create(fs.readFileSync(model).buffer);
const buf = fs.readFileSync(inp);
const x = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
const r = await s.run({[s.inputNames[0]]: new ort.Tensor('float32', x, [Number(n), 3, 48, 192])});
fs.writeFileSync(out, Buffer.from(r[s.outputNames[0]].data.buffer));
