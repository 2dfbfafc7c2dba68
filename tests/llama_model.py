"""A tiny llama-architecture GGUF model written by the tests themselves: random weights, a GPT-2
style byte-level BPE vocabulary trained on the repository's own text, a chat template, and an
end-of-sequence token weighted so that replies end after a few dozen tokens.

How the weighting works: attention and feed-forward weights are small, so the residual stream at
a position is mostly the embedding of the token there. Every embedding has dimension 0 set to one
(a constant after the norm) and the EOS row of the output matrix reads it: a steady chance of
stopping at every step while sampling. A few tokens ("stoppers") also set dimension 1, which only
the EOS row reads strongly: after one of them the reply ends, even greedily. `talks_on` writes a
model whose EOS is never likely, so that its replies fill the context.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
N_EMBD, N_HEAD, N_LAYER, N_FF, VOCAB = 64, 4, 2, 128, 1024
TRAIN_CONTEXT = 4096


def _training_text() -> list[str]:
    files = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md")),
             REPO / "tests" / "data" / "dialogues.jsonl"]
    return [path.read_text(encoding="utf-8") for path in files if path.is_file()]


def _vocabulary() -> tuple[list[str], list[str]]:
    """Tokens (by id) and merges of a byte-level BPE trained on local text."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(_training_text(), trainer)
    vocab = tokenizer.get_vocab()
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    import json

    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    merges = [" ".join(m) if isinstance(m, list) else m for m in merges]
    return tokens, merges


def write_model(path: Path, *, talks_on: bool = False, seed: int = 0) -> Path:
    """Write the model to `path` (the gguf package) and return it."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens, merges = _vocabulary()
    n_vocab = len(tokens)
    eos = tokens.index("<|endoftext|>")
    im_end = tokens.index("<|im_end|>")
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("proactflow-tiny")
    writer.add_context_length(TRAIN_CONTEXT)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if token in SPECIALS
                            else gguf.TokenType.NORMAL for token in tokens])
    writer.add_token_merges(merges)
    writer.add_bos_token_id(eos)
    writer.add_eos_token_id(eos)
    writer.add_eot_token_id(im_end)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    def small(*shape: int, scale: float = 0.02) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    embedding = small(n_vocab, N_EMBD, scale=0.3)
    embedding[:, 0] = 1.0
    embedding[:, 1] = 0.0
    stoppers = rng.choice(n_vocab, size=n_vocab // 25, replace=False)
    if not talks_on:
        embedding[stoppers, 1] = 1.0
    output = small(n_vocab, N_EMBD, scale=0.3)
    output[:, :2] = 0.0
    output[[eos, im_end], :] = 0.0
    if not talks_on:
        output[eos, 0] = 1.6  # a steady few per cent per sampled token
        output[eos, 1] = 12.0  # certain after a stopper
    else:
        output[eos, 0] = -20.0
    writer.add_tensor("token_embd.weight", embedding)
    for block in range(N_LAYER):
        prefix = f"blk.{block}"
        writer.add_tensor(f"{prefix}.attn_norm.weight", np.ones(N_EMBD, np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{prefix}.{name}.weight", small(N_EMBD, N_EMBD))
        writer.add_tensor(f"{prefix}.ffn_norm.weight", np.ones(N_EMBD, np.float32))
        writer.add_tensor(f"{prefix}.ffn_gate.weight", small(N_FF, N_EMBD))
        writer.add_tensor(f"{prefix}.ffn_up.weight", small(N_FF, N_EMBD))
        writer.add_tensor(f"{prefix}.ffn_down.weight", small(N_EMBD, N_FF))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, np.float32))
    writer.add_tensor("output.weight", output)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
