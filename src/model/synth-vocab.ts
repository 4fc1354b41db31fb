// The synthetic models' tokenizer: GPT-2 style byte-level BPE over every byte plus merges of
// common English word prefixes, with ChatML's special tokens and template.
import type { MetadataEntry } from "../gguf/writer.ts";

export const SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;
const CHATML_TEMPLATE = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + " +
  "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** The tokenizer's GGUF metadata; llama adds BOS, the qwen family does not. */
export function vocabMetadata(o: { nVocab: number; arch: string }): MetadataEntry[] {
  const { tokens, types, merges } = synthVocab(o.nVocab);
  return [
    ["tokenizer.ggml.model", "gpt2", "string"],
    ["tokenizer.ggml.pre", "default", "string"],
    ["tokenizer.ggml.tokens", tokens, { array: "string" }],
    ["tokenizer.ggml.token_type", types, { array: "i32" }],
    ["tokenizer.ggml.merges", merges, { array: "string" }],
    ["tokenizer.ggml.bos_token_id", 1, "u32"],
    ["tokenizer.ggml.eos_token_id", 2, "u32"],
    ["tokenizer.ggml.padding_token_id", 0, "u32"],
    ["tokenizer.ggml.add_bos_token", o.arch === "llama", "bool"],
    ["tokenizer.chat_template", CHATML_TEMPLATE, "string"],
  ];
}

/** GPT-2's reversible byte → printable character map, so every byte is a token. */
function byteChars(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const chars = new Array<string>(256);
  for (const b of printable) chars[b] = String.fromCodePoint(b);
  let extra = 0;
  for (let b = 0; b < 256; b++) if (chars[b] === undefined) chars[b] = String.fromCodePoint(256 + extra++);
  return chars;
}

// Words whose prefixes become merges, so English text tokenizes into a few tokens per word.
const WORDS =
  ("the of and to in is you that it he was for on are as with his they at be this have from or one had " +
    "by word but not what all were we when your can said there use an each which she do how their if will up other " +
    "about out many then them these so some her would make like him into time has look two more write go see number " +
    "no way could people my than first water been call who oil its now find long down day did get come made may part " +
    "capital france paris city country language model hello world").split(" ");

/** Tokens before the first filler token (<|extra_0|>): specials, bytes and every merge. */
export const BASE_VOCAB: number = synthVocab(Number.MAX_SAFE_INTEGER, false).tokens.length;

/** How many more bytes the tokenizer metadata of nVocab (at least BASE_VOCAB) tokens takes than
 *  that of BASE_VOCAB: each filler's string (u64 length, then "<|extra_i|>") and i32 type. */
export function fillerBytes(nVocab: number): number {
  const n = nVocab - BASE_VOCAB; // fillers 0 .. n-1
  let bytes = n * (8 + "<|extra_|>".length + 4);
  for (let d = 1, lo = 0, hi = 10; lo < n; d++, lo = hi, hi *= 10) bytes += d * (Math.min(n, hi) - lo);
  return bytes;
}

/** Token ids: 0..2 special, 3..258 the 256 bytes, then merges of word prefixes (" t", " th", " the", ...). */
function synthVocab(
  nVocab: number,
  fill = true,
): { tokens: string[]; types: number[]; merges: string[] } {
  const NORMAL = 1, CONTROL = 3, USER_DEFINED = 4;
  const chars = byteChars();
  const tokens: string[] = [...SPECIAL_TOKENS, ...chars];
  const types: number[] = [...SPECIAL_TOKENS.map(() => CONTROL), ...chars.map(() => NORMAL)];
  const merges: string[] = [];
  const known = new Set(tokens);
  const space = chars[0x20];
  outer: for (const word of WORDS) {
    let left = space;
    for (const ch of word) {
      if (tokens.length >= nVocab) break outer;
      const merged = left + ch;
      if (!known.has(merged)) {
        known.add(merged);
        tokens.push(merged);
        types.push(NORMAL);
        merges.push(`${left} ${ch}`);
      }
      left = merged;
    }
  }
  for (let i = 0; fill && tokens.length < nVocab; i++) {
    tokens.push(`<|extra_${i}|>`);
    types.push(USER_DEFINED);
  }
  return { tokens, types, merges };
}
