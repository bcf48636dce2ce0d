// greedy.mjs MODEL.gguf N [THREADS [f32]] — llama.cpp (through the npm package node-llama-cpp, CPU, no
// download or build; THREADS, default 1) generates N tokens greedily after BOS and prints their ids on one
// line (f32: with an F32 key/value cache and no flash attention, as Kiln computes attention; by
// default llama.cpp keeps the cache in F16 and picks flash attention itself), then "llama.cpp decode: T tokens/s" through node's loop (wall clock); llama.cpp's own
// timings (eval time per token, without node's overhead) follow on stderr.
import {getLlama} from "node-llama-cpp";

const [model_path, n_arg, threads_arg, mode] = process.argv.slice(2);
const n = Number(n_arg || 256);
const threads = Number(threads_arg || 1);
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, logLevel: "info"});
const model = await llama.loadModel({modelPath: model_path});
const exact = mode === "f32" ? {experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32", flashAttention: false} : {};
const context = await model.createContext({contextSize: 512, threads, batchSize: 512, performanceTracking: true, ...exact});
const seq = context.getSequence();
const ids = [];
const t0 = process.hrtime.bigint();
for await (const id of seq.evaluate([1], {temperature: 0})) {
  ids.push(id);
  if (ids.length >= n) break;
}
const secs = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(ids.join(" "));
console.log(`llama.cpp decode: ${(ids.length / secs).toFixed(0)} tokens/s`);
// llama.cpp's own clock (llama_perf_context_print), printed to stderr by the library.
await context.printTimings();
await context.dispose();
await model.dispose();
