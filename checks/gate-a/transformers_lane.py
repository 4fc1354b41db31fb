"""Gate A's reference lane: the GGUF's own weights, dequantized to F32, run by Hugging Face
Transformers on PyTorch CPU. `strata bench gate-a` installs what this needs into a venv of
its own and drives it:

  export GGUF OUT_DIR      F32 safetensors + config.json for Transformers, and an F16 GGUF of
                           the same weights for llama.cpp (OUT_DIR/model-f16.gguf)
  run MODEL_DIR JOB.json   figures (TTFT, prefill and decode tok/s, p50/p95, RSS) and the
                           log-probabilities of every next token of a fixed text

Token ids come from the caller (every lane sees the same ids); one JSON object is printed.
"""

import json
import os
import resource
import sys
import time

import numpy as np


def gguf_fields(reader):
    """Metadata as plain Python values (strings decoded, arrays as lists)."""
    out = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        out[name] = field.contents()
    return out


def unpermute(w, n_head):
    # llama.cpp's converter reorders Q and K rows per head (pairs interleaved for its rope);
    # Transformers wants each head's two halves back to back
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


HF_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def export(gguf_path, out_dir):
    import gguf
    from gguf import GGMLQuantizationType as Q
    from safetensors.numpy import save_file

    reader = gguf.GGUFReader(gguf_path)
    meta = gguf_fields(reader)
    arch = meta["general.architecture"]
    if arch != "llama":
        raise SystemExit(f"gate-a: {arch} models are not mapped to Transformers here")
    n_head = int(meta["llama.attention.head_count"])
    n_head_kv = int(meta.get("llama.attention.head_count_kv", n_head))
    weights = {}
    f16 = gguf.GGUFWriter(os.path.join(out_dir, "model-f16.gguf.part"), arch)
    for t in reader.tensors:
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w = w.reshape([int(d) for d in reversed(t.shape)]) if w.ndim == 1 and len(t.shape) > 1 else w
        # the F16 GGUF keeps llama.cpp's layout and names; 1-D tensors (norms) stay F32
        f16.add_tensor(t.name, w.astype(np.float16) if w.ndim > 1 else w, raw_dtype=Q.F16 if w.ndim > 1 else Q.F32)
        parts = t.name.split(".")
        if t.name == "token_embd.weight":
            weights["model.embed_tokens.weight"] = w
        elif t.name == "output_norm.weight":
            weights["model.norm.weight"] = w
        elif t.name == "output.weight":
            weights["lm_head.weight"] = w
        elif parts[0] == "blk" and parts[2] in HF_NAMES:
            if parts[2] == "attn_q":
                w = unpermute(w, n_head)
            elif parts[2] == "attn_k":
                w = unpermute(w, n_head_kv)
            weights[f"model.layers.{parts[1]}.{HF_NAMES[parts[2]]}.weight"] = np.ascontiguousarray(w)
        else:
            raise SystemExit(f"gate-a: no Transformers name for {t.name}")
    for name, value in meta.items():
        if name in ("general.architecture", "general.file_type"):
            continue
        field = reader.fields[name]
        vtype = gguf.GGUFValueType(field.types[0])
        sub = gguf.GGUFValueType(field.types[1]) if vtype == gguf.GGUFValueType.ARRAY else None
        f16.add_key_value(name, value, vtype, sub_type=sub)
    f16.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    f16.write_header_to_file()
    f16.write_kv_data_to_file()
    f16.write_tensors_to_file()
    f16.close()
    os.replace(os.path.join(out_dir, "model-f16.gguf.part"), os.path.join(out_dir, "model-f16.gguf"))

    tied = "lm_head.weight" not in weights
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": int(meta["llama.embedding_length"]),
        "intermediate_size": int(meta["llama.feed_forward_length"]),
        "num_hidden_layers": int(meta["llama.block_count"]),
        "num_attention_heads": n_head,
        "num_key_value_heads": n_head_kv,
        "rms_norm_eps": float(meta["llama.attention.layer_norm_rms_epsilon"]),
        "rope_theta": float(meta.get("llama.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(meta["llama.context_length"]),
        "vocab_size": weights["model.embed_tokens.weight"].shape[0],
        "hidden_act": "silu",
        "tie_word_embeddings": tied,
        "torch_dtype": "float32",
        "attention_bias": False,
        "mlp_bias": False,
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file(weights, os.path.join(out_dir, "model.safetensors"))
    print(json.dumps({"tensors": len(weights), "tied_embeddings": tied, "config": config}))


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(model_dir, job_path):
    import torch
    from transformers import AutoModelForCausalLM

    with open(job_path) as f:
        job = json.load(f)
    torch.set_num_threads(int(job["threads"]))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()

    def generate(prompt, steps):
        ids = torch.tensor([prompt], dtype=torch.long)
        t0 = time.perf_counter()
        out = model(input_ids=ids, use_cache=True)
        ttft = (time.perf_counter() - t0) * 1000
        past = out.past_key_values
        token = int(out.logits[0, -1].argmax())
        step_ms = []
        for _ in range(steps):
            t = time.perf_counter()
            out = model(input_ids=torch.tensor([[token]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = int(out.logits[0, -1].argmax())
            step_ms.append((time.perf_counter() - t) * 1000)
        return ttft, step_ms

    with torch.inference_mode():
        generate(job["warmup"], len(job["warmup"]))
        ttft, step_ms = generate(job["prompt"], int(job["decode_tokens"]))
        rss = rss_mb()
        # every next token of the fixed text at once: log-probabilities, position by position
        text = torch.tensor([job["text"]], dtype=torch.long)
        logits = model(input_ids=text, use_cache=False).logits[0].float()
        logprobs = torch.log_softmax(logits, dim=-1).numpy().astype(np.float32)
    logprobs.tofile(job["logprobs_out"])
    print(json.dumps({
        "ttft_ms": ttft,
        "step_ms": step_ms,
        "rss_mb": rss,
        "positions": int(logprobs.shape[0]),
        "vocab": int(logprobs.shape[1]),
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "export":
        export(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(__doc__)
