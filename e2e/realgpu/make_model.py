#!/usr/bin/env python3
"""Writes the real-GPU run's "checkpoint": a model config and a tokenizer, no
weights (server.py draws them at load time from a fixed seed).

The tokenizer is built here with the `tokenizers` library: word-level, its
vocabulary every word and punctuation mark of the GSM8K splits, an unknown
word one [UNK] token. So a common English word is one token, as it is in the
large vocabularies of production tokenizers, and the prompt lengths the
engine reports match what loadgen asked for (a byte-level BPE trained on
GSM8K's few megabytes alone splits a fifth of loadgen's words and reports
prompts ~30 % longer than asked, which the validity gate rightly refuses).
The model is a Llama-architecture decoder of about 0.4 B parameters
(bf16). Random weights cost the same compute as trained ones; they answer
GSM8K with noise.

    make_model.py --out DIR --gsm8k-train train.jsonl [--gsm8k-test test.jsonl]
"""
import argparse
import json
import os
import sys

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def texts(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            yield d["question"]
            yield d["answer"]


def build_tokenizer(paths):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=1_000_000, special_tokens=["[UNK]"] + SPECIAL, min_frequency=1, show_progress=False)
    tok.train_from_iterator((t for p in paths for t in texts(p)), trainer=trainer)
    # The chat template's markers stay whole inside text.
    tok.add_special_tokens(SPECIAL)
    return tok


def model_config(vocab_size, eos_id, bos_id):
    # Llama layout: 8 layers, hidden 2048, 16 query and 8 KV heads of 128,
    # SwiGLU 5632; untied embeddings. ~0.38 B in the blocks plus 2 x vocab x
    # 2048 in the embeddings. Few wide layers rather than many narrow ones:
    # at small batches the engine's step time is kernel launches, per layer,
    # so an 8k1k point at c1 takes about a minute, not four (24 layers of
    # 1024 decoded 37 tok/s on the H100), and the whole run fits one call.
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 16384,
        "rms_norm_eps": 1e-5,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
        "initializer_range": 0.02,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "torch_dtype": "bfloat16",
        "use_cache": True,
    }


def params(cfg):
    h, i, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    kv = cfg["num_key_value_heads"] * cfg["head_dim"]
    q = cfg["num_attention_heads"] * cfg["head_dim"]
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * i + 2 * h
    return L * per_layer + 2 * cfg["vocab_size"] * h + h


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gsm8k-train", required=True)
    ap.add_argument("--gsm8k-test")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tok = build_tokenizer([p for p in (a.gsm8k_train, a.gsm8k_test) if p])
    sample = "time year people way day kernel tensor prefill"
    print(f"make_model.py: {sample!r} -> {len(tok.encode(sample).ids)} tokens", file=sys.stderr)
    tok.save(os.path.join(a.out, "tokenizer.json"))
    n = tok.get_vocab_size()
    vocab = (n + 127) // 128 * 128  # room for every id, padded for the kernels
    eos, bos = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|endoftext|>")
    cfg = model_config(vocab, eos, bos)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    meta = {"tokenizer": "word-level (GSM8K words)", "tokenizer_vocab": n, "model_vocab": vocab,
            "parameters": params(cfg), "architecture": "LlamaForCausalLM"}
    with open(os.path.join(a.out, "model_info.json"), "w") as f:
        json.dump(meta, f, indent=2)
    json.dump(meta, sys.stdout)
    print()


if __name__ == "__main__":
    main()
