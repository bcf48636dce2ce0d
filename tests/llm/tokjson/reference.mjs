// reference.mjs — the reference ids for tests/llm/tokjson/: transformers.js's tokenizers
// (npm @lenml/tokenizers, a dependency-free fork of @huggingface/transformers' tokenizers)
// encode each line of a text file with a model's tokenizer.json and tokenizer_config.json,
// without special tokens added (no BOS/EOS), one line of space-separated ids per text line.
// Run by make_fixtures.sh from a scratch directory holding node_modules; never by make test.
//
//   node reference.mjs MODEL_DIR TEXTS > IDS
import { TokenizerLoader } from "@lenml/tokenizers";
import fs from "fs";

const [dir, textsPath] = process.argv.slice(2);
const tok = TokenizerLoader.fromPreTrained({
  tokenizerJSON: JSON.parse(fs.readFileSync(dir + "/tokenizer.json", "utf8")),
  tokenizerConfig: JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json", "utf8")),
});
const lines = fs.readFileSync(textsPath, "utf8").split("\n");
if (lines[lines.length - 1] === "") lines.pop();
const out = lines.map((s) => tok.encode(s, { add_special_tokens: false }).join(" "));
process.stdout.write(out.join("\n") + "\n");
