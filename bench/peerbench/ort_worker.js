// ort_worker.js — ONNX Runtime (npm onnxruntime-node, CPU execution provider) as a
// peer-benchmark worker (protocol: worker.h).
//
//   node bench/peerbench/ort_worker.js CACHE_DIR THREADS
//   (NODE_PATH names the node_modules that run.py installed under .cache/bench/node)
//
// `load W` creates an InferenceSession on the ONNX file prepare.py exported
// (data/W/spec.json names it) with intraOpNumThreads = THREADS, one inter-op thread,
// sequential execution and every graph optimisation on (ORT's defaults otherwise,
// including its spinning thread pool), reads the inputs and runs once. Timing:
// process.hrtime.bigint() for wall-clock time, process.cpuUsage() (user + system µs of
// the whole process) for CPU time.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const ort = require('onnxruntime-node');

const TYPED = { float32: Float32Array, int32: Int32Array, int64: BigInt64Array };

const nowUs = () => Number(process.hrtime.bigint()) / 1e3;
const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

// A tensor from a raw little-endian file described by {dtype, shape}.
function readTensor(file, spec) {
  const T = TYPED[spec.dtype];
  if (!T) throw new Error(`${file}: dtype ${spec.dtype} not supported here`);
  const buf = fs.readFileSync(file);
  const n = spec.shape.reduce((a, b) => a * b, 1);
  if (buf.length !== n * T.BYTES_PER_ELEMENT) throw new Error(`${file}: expected ${n * T.BYTES_PER_ELEMENT} bytes`);
  const data = new T(n);
  new Uint8Array(data.buffer).set(buf);
  return new ort.Tensor(spec.dtype, data, spec.shape);
}

class Worker {
  constructor(cacheDir, threads) {
    this.cacheDir = cacheDir;
    this.threads = threads;
    this.session = null;
  }

  async load(name) {
    this.session = null;
    const t0 = nowUs();
    const ddir = path.join(this.cacheDir, 'data', name);
    const spec = JSON.parse(fs.readFileSync(path.join(ddir, 'spec.json'), 'utf8'));
    if (!spec.onnx) throw new Error(`${name}: no ONNX export (prepare.py ran with --no-onnx)`);
    const session = await ort.InferenceSession.create(path.join(this.cacheDir, spec.onnx), {
      executionProviders: ['cpu'],
      intraOpNumThreads: this.threads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
    });
    this.feeds = {};
    for (const i of spec.inputs) this.feeds[i.name] = readTensor(path.join(ddir, i.file), i);
    this.session = session;
    const t1 = nowUs();
    await this.call();
    const t2 = nowUs();
    return { ok: true, load_ms: (t1 - t0) / 1e3, first_us: t2 - t1 };
  }

  async call() {
    this.out = await this.session.run(this.feeds);
  }

  save(file) {
    const names = this.session.outputNames;
    const parts = names.map((n) => {
      const d = this.out[n].data;
      return Buffer.from(d.buffer, d.byteOffset, d.byteLength);
    });
    fs.writeFileSync(file, Buffer.concat(parts));
    return { ok: true };
  }

  async run(warm, k) {
    for (let i = 0; i < warm; i++) await this.call();
    const wall = [], cpu = [];
    for (let i = 0; i < k; i++) {
      const w0 = nowUs(), c0 = cpuUs();
      await this.call();
      const c1 = cpuUs(), w1 = nowUs();
      wall.push(w1 - w0);
      cpu.push(c1 - c0);
    }
    return { wall_us: wall, cpu_us: cpu };
  }

  // One command (split into words) -> its reply object.
  async handle(words) {
    const [cmd, ...args] = words;
    if (cmd === 'load' && args.length === 1) return this.load(args[0]);
    if ((cmd === 'save' || cmd === 'run') && !this.session) return { error: `${cmd}: nothing loaded` };
    if (cmd === 'save' && args.length === 1) return this.save(args[0]);
    if (cmd === 'run' && args.length === 2) return this.run(parseInt(args[0], 10), parseInt(args[1], 10));
    return { error: 'bad command: expected load W | save PATH | run WARM K | quit' };
  }
}

async function main() {
  if (process.argv.length !== 4) {
    process.stderr.write('usage: ort_worker.js CACHE_DIR THREADS\n');
    process.exit(2);
  }
  const threads = parseInt(process.argv[3], 10);
  const worker = new Worker(path.resolve(process.argv[2]), threads);
  const version = require('onnxruntime-node/package.json').version;
  process.stdout.write(JSON.stringify({ ready: true, runtime: 'ort', version, threads }) + '\n');
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const words = line.trim().split(/\s+/).filter((w) => w);
    if (!words.length) continue;
    if (words[0] === 'quit') {
      process.stdout.write('{"ok": true}\n');
      break;
    }
    let reply;
    try {
      reply = await worker.handle(words);
    } catch (e) {  // a failed command is reported; the worker keeps serving
      reply = { error: String(e && e.message ? e.message : e) };
    }
    process.stdout.write(JSON.stringify(reply) + '\n');
  }
  process.exit(0);
}

main();
