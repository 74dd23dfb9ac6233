"""A tiny Qwen3 and its tokenizer, built locally with no download.

The CPU pipeline (`cpu-tiny`) and the tests need a real causal LM that fits in seconds: a Qwen3 made
from a config (random weights) and a byte-level BPE trained with `tokenizers` on the texts the model
will see (task files, solutions, prompts). Byte-level means any text round-trips, so prompts with
characters the training texts lacked still tokenise. The tokenizer speaks ChatML, the format Qwen
models use, so the same prompt code serves the tiny model and real Qwen checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

# Imports inside functions: torch, transformers and tokenizers (0.1-3 s each to import) load when a tiny model is
# built, not when this module is imported for its records and helpers.

# ChatML: <|im_start|>role\ncontent<|im_end|>\n per message, then the assistant header when asked.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@dataclass(frozen=True)
class TinyModelConfig:
    """Shape of the tiny Qwen3 (the defaults give ~0.3M parameters plus embeddings)."""

    vocab_size: int = 2048
    """Target BPE vocabulary (the trained tokenizer may come out smaller on little text)."""
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    """Grouped-query attention as in Qwen3 (heads share key/value projections)."""
    intermediate_size: int = 128
    max_position_embeddings: int = 8192
    """Long enough for a turn-4 prompt with three earlier kernels in it."""
    seed: int = 0
    """Seed for the random initial weights."""
    merge_across_words: bool = False
    """Let the BPE merge across spaces and punctuation (byte-level without the GPT-2 word split), digits kept
    apart: the text a data set repeats between two numbers becomes one token, so an answer is a few dozen
    tokens, its first one already naming it, and sampling one costs few steps. Still byte-level: any text
    round-trips."""


def train_tokenizer(texts: Iterable[str], vocab_size: int = 2048, merge_across_words: bool = False):
    """Train a byte-level BPE on `texts`; return a `PreTrainedTokenizerFast` with a ChatML chat template.
    `merge_across_words`: merges may span words (`TinyModelConfig.merge_across_words`)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=not merge_across_words)
    # Across words, but never across a digit: a number reads digit by digit, so a task's constants or a
    # measured speedup never fuse with the text around them into a token only that task's prompt has.
    tok.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"[0-9]"), "isolated"), byte_level])
                         if merge_across_words else byte_level)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   additional_special_tokens=["<|im_start|>"])
    fast.chat_template = CHATML_TEMPLATE
    fast.padding_side = "left"  # generation appends on the right, so pad prompts on the left
    return fast


def build_tiny_model(tokenizer, config: TinyModelConfig = TinyModelConfig()):
    """A randomly initialised Qwen3ForCausalLM sized by `config`, vocabulary matched to `tokenizer`."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(vocab_size=len(tokenizer), hidden_size=config.hidden_size,
                      intermediate_size=config.intermediate_size, num_hidden_layers=config.num_layers,
                      num_attention_heads=config.num_heads, num_key_value_heads=config.num_kv_heads,
                      head_dim=config.hidden_size // config.num_heads,
                      max_position_embeddings=config.max_position_embeddings, tie_word_embeddings=True,
                      bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(config.seed)
    model = Qwen3ForCausalLM(cfg)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_tiny(texts: Iterable[str], config: TinyModelConfig = TinyModelConfig()):
    """Tokenizer trained on `texts` and a fresh tiny Qwen3 over it: `(model, tokenizer)`."""
    tokenizer = train_tokenizer(texts, config.vocab_size, config.merge_across_words)
    return build_tiny_model(tokenizer, config), tokenizer
