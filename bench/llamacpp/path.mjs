// path.mjs MODEL.gguf N — llama.cpp (node-llama-cpp, CPU, one thread, an F32 key/value cache
// and no flash attention, as greedy.mjs's f32 mode) generates N tokens greedily after BOS and
// prints, a line a step, the token it picked and that token's probability (llama.cpp's softmax
// of its logits): the path along which run.py compares Kiln's probabilities with llama.cpp's.
import {getLlama} from "node-llama-cpp";

const [model_path, n_arg] = process.argv.slice(2);
const n = Number(n_arg);
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, logLevel: "error"});
const model = await llama.loadModel({modelPath: model_path});
const context = await model.createContext({contextSize: 512, threads: 1, batchSize: 512, experimentalKvCacheKeyType: "F32",
                                           experimentalKvCacheValueType: "F32", flashAttention: false});
const seq = context.getSequence();
let i = 0;
for await (const out of seq.evaluateWithMetadata([1], {probabilities: true}, {temperature: 0})) {
  console.log(`${out.token} ${out.probabilities.get(out.token)}`);
  if (++i >= n) break;
}
await context.dispose();
await model.dispose();
