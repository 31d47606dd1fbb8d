#!/usr/bin/env python3
"""Writes the real-GPU run's "checkpoint": a model config and a tokenizer, no
weights (server.py draws them at load time from a fixed seed).

The tokenizer is a byte-level BPE trained here with the `tokenizers` library
on the GSM8K train split, so common English words (loadgen's prompts) and
GSM8K's text are mostly one token each. The model is a Llama-architecture
decoder of about 0.45 B parameters (bf16). Random weights cost the same
compute as trained ones; they answer GSM8K with noise.

    make_model.py --out DIR --gsm8k-train train.jsonl [--vocab 32768]
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


def build_tokenizer(train, vocab):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        min_frequency=2,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts(train), trainer=trainer)
    return tok


def model_config(vocab_size, eos_id, bos_id):
    # Llama layout: 24 layers, hidden 1024, 16 query and 8 KV heads of 64,
    # SwiGLU 4096; untied embeddings. ~0.38 B in the blocks plus 2 x vocab x
    # 1024 in the embeddings.
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab_size,
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 64,
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
    ap.add_argument("--vocab", type=int, default=32768)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tok = build_tokenizer(a.gsm8k_train, a.vocab)
    tok.save(os.path.join(a.out, "tokenizer.json"))
    n = tok.get_vocab_size()
    vocab = (n + 127) // 128 * 128  # room for every id, padded for the kernels
    eos, bos = tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|endoftext|>")
    cfg = model_config(vocab, eos, bos)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    meta = {"tokenizer_vocab": n, "model_vocab": vocab, "parameters": params(cfg), "architecture": "LlamaForCausalLM"}
    with open(os.path.join(a.out, "model_info.json"), "w") as f:
        json.dump(meta, f, indent=2)
    json.dump(meta, sys.stdout)
    print()


if __name__ == "__main__":
    main()
