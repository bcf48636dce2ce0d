// tokenize.mjs MODEL.gguf TEXT_FILE — llama.cpp's tokenizer (through node-llama-cpp) on
// every line of TEXT_FILE (UTF-8), printed as space-separated ids, one line per input
// line, without BOS: the reference ids of tests/llm/tok512_ids.txt (see its header).
import {getLlama} from "node-llama-cpp";
import {readFileSync} from "node:fs";

const [model_path, text_path] = process.argv.slice(2);
const llama = await getLlama({gpu: false, build: "never", skipDownload: true, logLevel: "error"});
const model = await llama.loadModel({modelPath: model_path});
const lines = readFileSync(text_path, "utf8").split("\n");
if (lines[lines.length - 1] === "") lines.pop();
for (const line of lines) console.log(model.tokenize(line, false).join(" "));
await model.dispose();
