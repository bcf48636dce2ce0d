// ort_profile.js — ONNX Runtime's own per-node profile of a peer workload, for
// bench/profile/profile.py --ort (never make test).
//
//   NODE_PATH=CACHE/node/node_modules node bench/peerbench/ort_profile.js CACHE WORKLOAD THREADS CALLS
//
// The session is ort_worker.js's (CPU execution provider, intraOpNumThreads = THREADS, one
// inter-op thread, sequential, every graph optimisation) with ORT's profiler on; the inputs
// are the workload's (prepare.py). One warm-up call, then CALLS calls. Prints, tab-separated,
// "total NS CALLS" (ORT's model_run events) and one line a node in the order ORT first ran
// them: name, op, calls, nanoseconds (its kernel_time events), warm-up left out. The
// profiler's file goes to the system's temporary directory and is deleted.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const ort = require('onnxruntime-node');

const TYPED = { float32: Float32Array, int32: Int32Array, int64: BigInt64Array };

function readTensor(file, spec) {
  const T = TYPED[spec.dtype];
  if (!T) throw new Error(`${file}: dtype ${spec.dtype} not supported here`);
  const buf = fs.readFileSync(file);
  const data = new T(buf.length / T.BYTES_PER_ELEMENT);
  new Uint8Array(data.buffer).set(buf);
  return new ort.Tensor(spec.dtype, data, spec.shape);
}

async function main() {
  const [cacheDir, name, threadsArg, callsArg] = process.argv.slice(2);
  const threads = Number(threadsArg), calls = Number(callsArg);
  if (!name || !(threads >= 1) || !(calls >= 1)) throw new Error('usage: ort_profile.js CACHE WORKLOAD THREADS CALLS');
  const ddir = path.join(cacheDir, 'data', name);
  const spec = JSON.parse(fs.readFileSync(path.join(ddir, 'spec.json'), 'utf8'));
  if (!spec.onnx) throw new Error(`${name}: no ONNX export (prepare.py ran with --no-onnx)`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-ortprof-'));
  try {
    const session = await ort.InferenceSession.create(path.join(cacheDir, spec.onnx), {
      executionProviders: ['cpu'],
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      enableProfiling: true,
      profileFilePrefix: path.join(tmp, 'ort'),
    });
    const feeds = {};
    for (const i of spec.inputs) feeds[i.name] = readTensor(path.join(ddir, i.file), i);
    for (let c = 0; c <= calls; c++) await session.run(feeds);
    session.endProfiling();
    const file = fs.readdirSync(tmp).filter((f) => f.endsWith('.json'))[0];
    if (!file) throw new Error('ORT wrote no profile');
    const events = JSON.parse(fs.readFileSync(path.join(tmp, file), 'utf8'));
    const nodes = new Map();   // name -> {op, durs}
    const runs = [];
    for (const e of events) {
      if (e.cat === 'Session' && e.name === 'model_run') runs.push(e.dur);
      if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
      const n = e.name.slice(0, -'_kernel_time'.length);
      if (!nodes.has(n)) nodes.set(n, { op: (e.args && e.args.op_name) || '?', durs: [] });
      nodes.get(n).durs.push(e.dur);
    }
    const sum = (a) => a.reduce((s, x) => s + x, 0);
    console.log(`total\t${Math.round(sum(runs.slice(1)) * 1000)}\t${runs.length - 1}`);
    for (const [n, v] of nodes) console.log(`${n}\t${v.op}\t${v.durs.length - 1}\t${Math.round(sum(v.durs.slice(1)) * 1000)}`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(`ort_profile: ${e.message}`);
  process.exit(1);
});
