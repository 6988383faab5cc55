"""Tokenizers: ALBERT SentencePiece and BERT WordPiece (the Chinese ALBERT models).

`AlbertTokenizer` reproduces google-research/albert `tokenization.py`: `preprocess_text` (collapse whitespace,
NFKD, drop combining marks, lower-case), then the SentencePiece model, then the digit-comma re-split of
`encode_pieces` ("▁1999," -> "▁1999" ","). `WordPieceTokenizer` reproduces the same file's BERT path
(`BasicTokenizer` + greedy longest-match WordPiece).

Both give character offsets into the ORIGINAL text. Normalisation changes lengths (NFKD expands "ﬁ", drops
accents, collapses whitespace), so normalisation runs on an `_Aligned` string that carries, for every normalised
character, the span of original text it came from. The fast path (`encode_ids_batch`) skips all of that: it
normalises with plain string methods and hands the whole batch to SentencePiece's C++ batch encoder.

Directory layout is Hugging Face's: `spiece.model` (or `vocab.txt`) + `tokenizer_config.json` +
`special_tokens_map.json`, plus, for SentencePiece, a `tokenizer.json` that makes stock `transformers.AutoTokenizer`
give our ids (`files()` lists them all; tokenizer_json.py says how). Calling a tokenizer follows transformers'
convention (`tok(texts, text_pair, padding=..., truncation=..., max_length=..., return_tensors=...)`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from litebert.errors import ConfigError, LitebertError, TokenizerError, where
from litebert.files import atomic_write, read_json
from litebert.hub_cache import resolve_model_path
from litebert.tokenizer_json import (
    first_difference,
    SPIECE_UNDERLINE,
    TOKENIZER_JSON,
    is_comma_piece,
    read_spm_proto,
    read_tokenizer_json,
    regex_class,
    replace_step,
    unigram_tokenizer_json,
)

TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
# tokenizer_config.json's record of what the tokenizer.json beside it was built from (`_tokenizer_json_bytes`)
JSON_STAMP = "litebert_tokenizer_json"
MODEL_MAX_LENGTH = 512
# What a call returns, and what transformers returns from the directories we save (its generic class would leave
# out token_type_ids, and a model handed a pair would then read segment B as segment A).
MODEL_INPUT_NAMES = ("input_ids", "token_type_ids", "attention_mask")


# ----------------------------------------------------------------------------------------------------------------
# Text normalisation, plain and aligned


def _ranges(predicate) -> list[tuple[int, int]]:
    """The code points for which predicate(char) holds, as inclusive (first, last) runs."""
    ranges, start = [], None
    for cp in range(0x110000):
        if predicate(chr(cp)):
            if start is None:
                start = cp
        elif start is not None:
            ranges.append((start, cp - 1))
            start = None
    return ranges


@cache
def _combining_ranges() -> list[tuple[int, int]]:
    """Every code point with a non-zero canonical combining class (what preprocess_text drops after NFKD)."""
    return _ranges(lambda c: unicodedata.combining(c) != 0)


@cache
def _space_ranges() -> list[tuple[int, int]]:
    """Every code point for which str.isspace() holds (what str.split() splits on)."""
    return _ranges(str.isspace)


@cache
def _combining_re() -> re.Pattern:
    """One regex class holding every combining code point (built once, ~0.2 s)."""
    return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in _combining_ranges()) + "]")


def preprocess_text(text: str, remove_space: bool = True, lower: bool = False, keep_accents: bool = False) -> str:
    """google-research/albert `preprocess_text`. Not HF's: no doubled-backtick/quote -> '"' replacement.

    `keep_accents` follows HF's flag: it skips NFKD and the accent drop altogether.
    """
    if remove_space:
        text = " ".join(text.split())
    if not keep_accents and not text.isascii():  # NFKD is the identity on ASCII
        text = _combining_re().sub("", unicodedata.normalize("NFKD", text))
    return text.lower() if lower else text


def preprocess_steps(remove_space: bool = True, lower: bool = False, keep_accents: bool = False) -> list[dict]:
    """`preprocess_text` as tokenizers-library normalizer steps (for tokenizer.json), step for step: the same
    whitespace set (str.isspace) and the same marks (non-zero combining class, not every Unicode mark as the
    library's StripAccents would drop). Lower-casing is the library's per-character one, which differs from
    str.lower() only on a Greek capital sigma ending a word (ς here, σ there)."""
    steps = []
    if remove_space:
        space = regex_class(_space_ranges())
        steps += [replace_step(rf"\A{space}+|{space}+\z", ""), replace_step(f"{space}+", " ")]
    if not keep_accents:
        steps += [{"type": "NFKD"}, replace_step(regex_class(_combining_ranges()), "")]
    if lower:
        steps.append({"type": "Lowercase"})
    return steps


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)  # [n]


@cache
def _space_code_points() -> np.ndarray:
    return np.array([cp for a, b in _space_ranges() for cp in range(a, b + 1)], dtype=np.uint32)


class _Aligned:
    """A normalised string that knows, for each of its characters, the span of original text it came from.

    Work is vectorised with numpy and Python only touches the characters that change (non-ASCII ones, mostly),
    so a 1 MB book aligns in about a second. A dropped character (an accent, a control character) is absorbed by
    the surviving character before it: "cafe\u0301" -> "cafe" still maps back to the whole word.
    """

    def __init__(self, text: str):
        self.text = text
        self.length = len(text)  # of the original text
        self.starts = np.arange(len(text), dtype=np.int64)  # [m] original start of each normalised char
        self.ends = self.starts + 1  # [m] original end

    def collapse_whitespace(self) -> _Aligned:
        """Like " ".join(text.split()): outer whitespace goes; each inner run becomes one " " spanning the run."""
        n = len(self.text)
        space = np.isin(_code_points(self.text), _space_code_points())  # [n]
        solid = np.flatnonzero(~space)
        if solid.size == 0:
            return self._replace("", self.starts[:0], self.ends[:0])
        idx = np.arange(n)
        run_start = space & np.concatenate([[False], ~space[:-1]])  # first char of a whitespace run
        keep = ~space | (run_start & (idx < solid[-1]))
        next_solid = np.minimum.accumulate(np.where(space, n, idx)[::-1])[::-1]  # [n] next non-space position
        kept = np.flatnonzero(keep)
        ends = np.where(space[kept], self.starts[np.minimum(next_solid[kept], n - 1)], self.ends[kept])
        return self._replace(" ".join(self.text.split()), self.starts[kept], ends)

    def rewrite(self, fn, inspect=None) -> _Aligned:
        """Replace each char c by fn(c) (zero, one or more chars). Only chars at the `inspect(code_points)`
        positions are offered to fn (default: the non-ASCII ones), and fn runs once per distinct char."""
        cps = _code_points(self.text)
        offered = cps >= 128 if inspect is None else inspect(cps)
        table = {}
        for cp in np.unique(cps[offered]).tolist():
            if (r := fn(chr(cp))) != chr(cp):
                table[cp] = r
        if not table:
            return self
        parts, counts, prev = [], np.ones(len(self.text), dtype=np.int64), 0
        for p in np.flatnonzero(np.isin(cps, np.array(list(table), dtype=np.uint32))).tolist():
            r = table[ord(self.text[p])]
            parts += (self.text[prev:p], r)
            counts[p] = len(r)
            prev = p + 1
        parts.append(self.text[prev:])
        ends = self.ends.copy()
        dropped = np.flatnonzero(counts == 0)
        if dropped.size:  # absorb into the last surviving char before it
            before = np.maximum.accumulate(np.where(counts > 0, np.arange(len(counts)), -1))[dropped]
            ok = before >= 0
            np.maximum.at(ends, before[ok], self.ends[dropped[ok]])
        return self._replace("".join(parts), np.repeat(self.starts, counts), np.repeat(ends, counts))

    def lower(self) -> _Aligned:
        # str.lower is context-sensitive (final sigma) but context never changes a length: take the characters
        # from the whole-string lower() and the lengths from per-character lower().
        low = self.text.lower()
        if len(low) == len(self.text):
            return self._replace(low, self.starts, self.ends)
        out = self.rewrite(str.lower, inspect=lambda cps: cps >= 0)
        return out._replace(low if len(low) == len(out.text) else out.text, out.starts, out.ends)

    def _replace(self, text: str, starts: np.ndarray, ends: np.ndarray) -> _Aligned:
        out = object.__new__(_Aligned)
        out.text, out.length, out.starts, out.ends = text, self.length, starts, ends
        return out

    def spans(self, begins: Sequence[int], ends: Sequence[int]) -> list[tuple[int, int]]:
        """Original spans of normalised ranges [begin, end); an empty range maps to an empty span at its place."""
        b, e = np.asarray(begins, dtype=np.int64), np.asarray(ends, dtype=np.int64)  # [T]
        if b.size == 0:
            return []
        tail = self.ends[-1] if len(self.ends) else self.length
        start = np.append(self.starts, tail)[b]
        end = np.where(e > b, self.ends[np.maximum(e - 1, 0)] if len(self.ends) else tail, start)
        return list(zip(start.tolist(), end.tolist()))


@lru_cache(maxsize=1 << 16)
def _strip_nfkd(c: str) -> str:
    return c if c.isascii() else "".join(x for x in unicodedata.normalize("NFKD", c) if not unicodedata.combining(x))


@lru_cache(maxsize=1 << 16)
def _strip_nfd(c: str) -> str:
    # BERT's _run_strip_accents: NFD, then drop category Mn.
    if c.isascii():
        return c
    return "".join(x for x in unicodedata.normalize("NFD", c) if unicodedata.category(x) != "Mn")


# ----------------------------------------------------------------------------------------------------------------
# Shared encode / truncate / pad / save logic


class BatchEncoding(dict):
    """What a tokenizer call returns: {"input_ids", "token_type_ids", "attention_mask"}, also readable as
    attributes (enc.input_ids), as transformers' BatchEncoding is; `model(**enc)` takes it as it is."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, device) -> BatchEncoding:
        """The tensors moved to `device` (return_tensors="pt")."""
        return BatchEncoding({k: v.to(device) for k, v in self.items()})


def _text_list(texts, field: str) -> list[str]:
    if not isinstance(texts, (list, tuple)):
        raise ConfigError(f"{field}: a string or a list of strings, not {type(texts).__name__}")
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise ConfigError(f"{field}[{bad}]: a {type(texts[bad]).__name__}, not a string (pre-split words are not "
                          "taken: pass the text)")
    return list(texts)


@dataclass
class Encoding:
    """One encoded text or pair. offsets[i] = (start, end) in the original text; (0, 0) for specials/padding."""

    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    offsets: list[tuple[int, int]] | None = None

    def __len__(self) -> int:
        return len(self.input_ids)


_TRUNCATIONS = ("longest_first", "only_first", "only_second")
_PADDINGS = ("longest", "max_length")


def _check_options(truncation, padding, max_length) -> tuple[str | None, str | None]:
    if truncation is True:
        truncation = "longest_first"
    if truncation in (False, None):
        truncation = None
    elif truncation not in _TRUNCATIONS:
        raise ConfigError(f"truncation={truncation!r}: use one of {_TRUNCATIONS} or False")
    if padding is True:
        padding = "longest"
    if padding in (False, None, "do_not_pad"):
        padding = None
    elif padding not in _PADDINGS:
        raise ConfigError(f"padding={padding!r}: use 'longest', 'max_length' or False")
    if padding == "max_length" and max_length is None:
        raise ConfigError("padding='max_length' needs max_length")
    if max_length is not None and max_length < 2:
        raise ConfigError(f"max_length={max_length}: must leave room for [CLS] and [SEP] (>= 2)")
    return (truncation if max_length is not None else None), padding


def _truncated_lengths(na: int, nb: int | None, budget: int, strategy: str) -> tuple[int, int | None]:
    """How many tokens of each segment survive. longest_first is the official _truncate_seq_pair: drop one
    token at a time from the END of the longer segment (the second one on ties)."""
    if nb is None:
        if strategy == "only_second" and na > budget:
            raise ConfigError(f"truncation='only_second': a single text of {na} tokens, more than the {budget} that "
                              "max_length allows, has no second segment to cut (use 'longest_first')")
        return min(na, budget), None
    if na + nb <= budget:
        return na, nb
    if strategy == "only_first":
        if nb > budget:
            raise ConfigError(f"truncation='only_first': the second segment alone has {nb} tokens, more than the "
                              f"{budget} that max_length allows (use truncation='longest_first')")
        return budget - nb, nb
    if strategy == "only_second":
        if na > budget:
            raise ConfigError(f"truncation='only_second': the first segment alone has {na} tokens, more than the "
                              f"{budget} that max_length allows (use truncation='longest_first')")
        return na, budget - na
    while na + nb > budget:
        if na > nb:
            na -= 1
        else:
            nb -= 1
    return na, nb


class _TokenizerBase:
    """What both tokenizers share. A subclass sets vocab_file, vocab_size, the five special ids and special_ids,
    and provides encode_ids, _encode_offsets (ids plus original-text spans, no specials), id_to_token,
    token_to_id, settings, special_tokens, _is_word_start and _join_tokens."""

    tokenizer_class: str  # the transformers class name written to tokenizer_config.json
    vocab_file_name: str  # spiece.model / vocab.txt
    setting_names: tuple[str, ...]  # constructor arguments read back from tokenizer_config.json

    # -- shared ------------------------------------------------------------------------------------------------
    def encode_ids_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        return [self.encode_ids(t) for t in texts]

    def tokenize(self, text: str) -> list[str]:
        return self.convert_ids_to_tokens(self.encode_ids(text))

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.id_to_token(int(i)) for i in ids]

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return [self.token_to_id(t) for t in tokens]

    def __call__(self, text: str | Sequence[str], text_pair: str | Sequence[str] | None = None, *,
                 padding: bool | str = False, truncation: bool | str | None = None, max_length: int | None = None,
                 return_tensors: str | None = None) -> BatchEncoding:
        """transformers' calling convention, on top of `batch_encode`: a string (or a pair of strings) gives flat
        lists, a list of strings (and a list of pairs) gives a list per text, "pt" / "np" give [B, L] int64.

        padding: False / "do_not_pad", True / "longest" (the batch's longest row), "max_length".
        truncation: False / "do_not_truncate", True / "longest_first", "only_first", "only_second"; None (the
        default) truncates when max_length is given without padding, as transformers does. max_length, when
        truncation or padding="max_length" needs one and none is given: 512 (tokenizer_config.json's
        model_max_length). "longest_first" is the official _truncate_seq_pair, what fine-tuning uses; where both
        segments must be cut to an odd total, transformers' fast tokenizers give the extra token to the second
        segment when it is the longer (or equal) one, and this gives it to the first.
        """
        single = isinstance(text, str)
        texts = [text] if single else _text_list(text, "text")
        pairs = None
        if text_pair is not None:
            if isinstance(text_pair, str) != single:
                raise ConfigError("text and text_pair: give two strings, or two lists of strings")
            pairs = [text_pair] if single else _text_list(text_pair, "text_pair")
        if truncation is None:
            truncation = max_length is not None and padding is False
        if truncation == "do_not_truncate":
            truncation = False
        if max_length is None and (truncation is not False or padding == "max_length"):
            max_length = MODEL_MAX_LENGTH
        out = self.batch_encode(texts, pairs, max_length, truncation, padding, return_tensors=return_tensors)
        if single and return_tensors is None:
            out = {key: rows[0] for key, rows in out.items()}
        return BatchEncoding(out)

    def encode(self, text: str, pair: str | None = None, max_length: int | None = None,
               truncation: str | bool = "longest_first", padding: str | bool = False,
               return_offsets: bool = False) -> Encoding:
        """[CLS] A [SEP] (B [SEP]), token types 0.. 1..; max_length counts the specials and only applies when
        truncation or padding="max_length" asks for it."""
        out = self.batch_encode([text], None if pair is None else [pair], max_length, truncation, padding,
                                return_offsets)
        return Encoding(**{key: rows[0] for key, rows in out.items()})

    def batch_encode(self, texts: Sequence[str], pairs: Sequence[str] | None = None, max_length: int | None = None,
                     truncation: str | bool = "longest_first", padding: str | bool = False,
                     return_offsets: bool = False, return_tensors: str | None = None,
                     num_threads: int | None = None) -> dict:
        """Encode many texts (or pairs). Returns {"input_ids", "token_type_ids", "attention_mask"[, "offsets"]}
        as lists of lists, or as torch tensors (return_tensors="pt") or numpy int64 arrays ("np"); with tensors every
        row must have one length (pass padding)."""
        if isinstance(texts, str):
            raise ConfigError("batch_encode takes a list of texts; use encode() for a single text")
        if pairs is not None and len(pairs) != len(texts):
            raise ConfigError(f"batch_encode: {len(texts)} texts but {len(pairs)} pairs")
        truncation, padding = _check_options(truncation, padding, max_length)
        a_rows, a_offs = self._rows(texts, return_offsets, num_threads)
        b_rows, b_offs = self._rows(pairs, return_offsets, num_threads) if pairs is not None else (
            [None] * len(texts), [None] * len(texts))
        built = [self._assemble(a, b, oa, ob, max_length, truncation)
                 for a, b, oa, ob in zip(a_rows, b_rows, a_offs, b_offs)]
        out = {"input_ids": [ids for ids, _, _ in built], "token_type_ids": [types for _, types, _ in built],
               "attention_mask": [[1] * len(ids) for ids, _, _ in built]}
        if return_offsets:
            out["offsets"] = [offsets for _, _, offsets in built]
        if padding is not None and built:
            length = max_length if padding == "max_length" else max(map(len, out["input_ids"]))
            fill = {"input_ids": self.pad_id, "token_type_ids": 0, "attention_mask": 0, "offsets": (0, 0)}
            for key, rows in out.items():
                for row in rows:
                    row.extend([fill[key]] * (length - len(row)))
        if return_tensors == "pt":
            import torch

            if len({len(ids) for ids in out["input_ids"]}) > 1:
                raise ConfigError("return_tensors='pt' needs rows of one length: pass padding='longest' or "
                                  "'max_length'")
            out = {k: torch.tensor(v, dtype=torch.long) for k, v in out.items()}  # [B, L] ([B, L, 2] offsets)
        elif return_tensors == "np":  # the ONNX path: no torch needed
            if len({len(ids) for ids in out["input_ids"]}) > 1:
                raise ConfigError("return_tensors='np' needs rows of one length: pass padding='longest' or "
                                  "'max_length'")
            out = {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}  # [B, L] ([B, L, 2] offsets)
        elif return_tensors is not None:
            raise ConfigError(f"return_tensors={return_tensors!r}: 'pt', 'np' (or None for lists)")
        return out

    def _rows(self, texts: Sequence[str], return_offsets: bool, num_threads: int | None) -> tuple[list, list]:
        if not return_offsets:
            rows = [self.encode_ids(texts[0])] if len(texts) == 1 else self.encode_ids_batch(texts, num_threads)
            return rows, [None] * len(texts)
        encoded = [self._encode_offsets(t) for t in texts]
        return [ids for ids, _ in encoded], [offs for _, offs in encoded]

    def _assemble(self, a, b, oa, ob, max_length, truncation):
        if truncation is not None:
            budget = max_length - (3 if b is not None else 2)
            na, nb = _truncated_lengths(len(a), None if b is None else len(b), budget, truncation)
            a, oa = a[:na], (oa[:na] if oa is not None else None)
            if b is not None:
                b, ob = b[:nb], (ob[:nb] if ob is not None else None)
        ids = [self.cls_id, *a, self.sep_id]
        types = [0] * len(ids)
        offsets = [(0, 0), *oa, (0, 0)] if oa is not None else None
        if b is not None:
            ids += [*b, self.sep_id]
            types += [1] * (len(b) + 1)
            if offsets is not None:
                offsets += [*ob, (0, 0)]
        return ids, types, offsets

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        ids = [int(i) for i in ids]
        if skip_special_tokens:
            ids = [i for i in ids if i not in self.special_ids]
        return self._join_tokens(self.convert_ids_to_tokens(ids))

    def word_start_mask(self) -> np.ndarray:
        """[vocab_size] bool: True when a token starts a new whole word (for whole-word n-gram masking)."""
        if getattr(self, "_word_start", None) is None:
            mask = np.array([self._is_word_start(self.id_to_token(i)) for i in range(self.vocab_size)], dtype=bool)
            mask[list(self.special_ids)] = True
            self._word_start = mask
        return self._word_start.copy()

    def vocab_bytes(self) -> bytes:
        """The content of spiece.model / vocab.txt (rebuilt when the tokenizer came from a tokenizer.json)."""
        return self.vocab_file.read_bytes() if self._vocab_bytes is None else self._vocab_bytes

    def tokenizer_json(self) -> dict | None:
        return None

    def fingerprint(self) -> str:
        """sha256 of the vocab file bytes and the settings: equal fingerprints tokenize identically."""
        h = hashlib.sha256(self.vocab_bytes())
        h.update(json.dumps(self.settings(), sort_keys=True).encode())
        return h.hexdigest()

    def files(self) -> dict[str, Callable[[Path], None]]:
        """The files of a tokenizer directory, each as a function that writes it at a given path: the one list of
        what a saved tokenizer holds. `save_pretrained` runs them into a directory; a pretraining checkpoint and
        its final/ run them beside the model (as `pretrained.model_files` does for the weights).

        spiece.model / vocab.txt, tokenizer_config.json and special_tokens_map.json are Hugging Face's layout.
        A SentencePiece tokenizer adds tokenizer.json (see `tokenizer_json`), which transformers reads in
        preference to spiece.model, and names the generic class in tokenizer_config.json: transformers 5's
        AlbertTokenizer would rebuild its own normalizer from the vocab and ignore the file's. tokenizer_config.json
        then also stamps what tokenizer.json was built from (JSON_STAMP), so that a save of a tokenizer loaded from
        this directory copies the file instead of building it again (`_tokenizer_json_bytes`).
        """
        fast = self._tokenizer_json_bytes()
        specials = self.special_tokens()
        config = {"tokenizer_class": self.tokenizer_class if fast is None else "PreTrainedTokenizerFast",
                  **self.settings(), **specials, "model_max_length": MODEL_MAX_LENGTH,
                  "model_input_names": list(MODEL_INPUT_NAMES)}
        config.pop("max_input_chars_per_word", None)  # ours only (it is in settings() for the fingerprint)
        stamp = self._json_stamp(fast)
        if stamp is not None:
            config[JSON_STAMP] = stamp

        def text(data) -> Callable[[Path], None]:
            content = json.dumps(data, indent=2, ensure_ascii=False).encode()
            return lambda path: path.write_bytes(content)

        out = {self.vocab_file_name: lambda path: path.write_bytes(self.vocab_bytes())}
        if fast is not None:
            out[TOKENIZER_JSON] = lambda path: path.write_bytes(fast)
        out[TOKENIZER_CONFIG] = text(config)
        out[SPECIAL_TOKENS_MAP] = text(specials)
        return out

    def _tokenizer_json_bytes(self) -> bytes | None:
        """tokenizer.json's content, once per settings: the one beside the vocab file when its stamp says it was
        built from the same inputs (a directory we saved: pretraining's store, checkpoints and final/ all copy it
        then), else built (~0.3 CPU s for a 30k vocab, half of it listing Unicode's spaces and marks)."""
        key = json.dumps(self.settings(), sort_keys=True)
        cached = getattr(self, "_json_cache", None)
        if cached is None or cached[0] != key:
            content = self._stamped_tokenizer_json()
            if content is None:
                data = self.tokenizer_json()
                content = None if data is None else json.dumps(data, ensure_ascii=False).encode()
            cached = (key, content)
            self._json_cache = cached
        return cached[1]

    def _json_inputs(self) -> str | None:
        """sha256 of all tokenizer.json is built from: the vocab bytes and settings (the fingerprint), the code
        that builds it (its modules' source: any change there builds anew) and this Python's Unicode tables. None
        when the source cannot be read (then nothing is copied)."""
        code = _json_writer_digest()
        if code is None:
            return None
        return hashlib.sha256(f"{self.fingerprint()} {code} {unicodedata.unidata_version}".encode()).hexdigest()

    def _json_stamp(self, content: bytes | None) -> dict | None:
        inputs = self._json_inputs() if content is not None else None
        return None if inputs is None else {"inputs": inputs, "sha256": hashlib.sha256(content).hexdigest()}

    def _stamped_tokenizer_json(self) -> bytes | None:
        """The tokenizer.json beside the vocab file, when the tokenizer_config.json there stamps it as built from
        this tokenizer's inputs and its bytes are the ones stamped; else None (no stamp: written by transformers
        or an older litebert; other settings, vocab or code; a file edited since)."""
        folder = Path(self.vocab_file).parent
        if Path(self.vocab_file).name == TOKENIZER_JSON or not (folder / TOKENIZER_JSON).is_file():
            return None  # (a transformers-5 directory: its tokenizer.json is transformers')
        try:
            stamp = _read_config(folder).get(JSON_STAMP)
            if not isinstance(stamp, dict) or stamp.get("inputs") != self._json_inputs():
                return None
            content = (folder / TOKENIZER_JSON).read_bytes()
        except (LitebertError, OSError):
            return None  # a cache that cannot be read is rebuilt, not an error: the save goes on
        return content if hashlib.sha256(content).hexdigest() == stamp.get("sha256") else None

    def save_pretrained(self, out_dir: str | os.PathLike) -> Path:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        files = self.files()
        for name, write in files.items():
            target = out / name
            if name == self.vocab_file_name and target.exists() and target.samefile(self.vocab_file):
                continue  # saving into the directory it was loaded from
            atomic_write(target, write)
        if TOKENIZER_JSON not in files and (out / TOKENIZER_JSON).is_file():
            # One left by an earlier save (ours or transformers'): transformers would read it instead of ours.
            (out / TOKENIZER_JSON).unlink()
        return out

    @classmethod
    def from_pretrained(cls, directory: str | os.PathLike):
        directory = Path(directory)
        if not directory.is_dir():
            raise TokenizerError(f"{directory}: not a tokenizer directory (expected {cls.vocab_file_name} and "
                                 f"{TOKENIZER_CONFIG})")
        config = _read_config(directory)
        kwargs = {k: config[k] for k in cls.setting_names if k in config}
        if not (directory / cls.vocab_file_name).is_file() and (directory / TOKENIZER_JSON).is_file():
            kind, content = read_tokenizer_json(directory)
            if kind != cls.json_kind:
                raise TokenizerError(f"{directory / TOKENIZER_JSON}: a {kind} tokenizer, not {cls.__name__}'s")
            return cls(directory / TOKENIZER_JSON, **kwargs, **{cls.bytes_argument: content})
        tokenizer = cls(directory / cls.vocab_file_name, **kwargs)
        tokenizer._check_tokenizer_json(config.get(JSON_STAMP))
        return tokenizer

    def _check_tokenizer_json(self, stamp) -> None:
        """Refuse a directory whose tokenizer.json litebert stamped (tokenizer_config.json's JSON_STAMP) but that no
        longer holds what this vocab file and these settings give: transformers reads tokenizer.json in preference
        to the vocab file, so it would tokenize the directory otherwise than litebert does (or fail: a bad
        character map makes the tokenizers library panic). The bytes are checked against the stamp's sha256; only
        when they differ (an edit, or a reformatting save) is the content compared with what this tokenizer builds,
        floats as float32. A stamp of other inputs (another litebert, other settings) leaves nothing to compare."""
        path = Path(self.vocab_file).parent / TOKENIZER_JSON
        if not isinstance(stamp, dict) or not path.is_file():
            return
        if hashlib.sha256(path.read_bytes()).hexdigest() == stamp.get("sha256") or stamp.get("inputs") != \
                self._json_inputs():
            return
        differs = first_difference(read_json(path, TokenizerError, expect=dict), self.tokenizer_json())
        if differs:
            raise TokenizerError(f"{path}: not the tokenizer.json litebert wrote for {self.vocab_file.name} ({differs});"
                                 f" transformers reads tokenizer.json rather than {self.vocab_file.name}, so it would "
                                 "give other ids than litebert. Delete it (litebert writes it again at the next save) "
                                 "or put back the one that was there")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.vocab_file)!r}, vocab_size={self.vocab_size}, {self.settings()})"


@cache
def _json_writer_digest() -> str | None:
    """sha256 of the source of the modules that build tokenizer.json (this one and tokenizer_json)."""
    import litebert.tokenizer_json

    h = hashlib.sha256()
    for path in (__file__, litebert.tokenizer_json.__file__):
        try:
            h.update(Path(path).read_bytes())
        except (OSError, TypeError):
            return None
    return h.hexdigest()


def _read_config(directory: Path) -> dict:
    path = directory / TOKENIZER_CONFIG
    if not path.exists():
        return {}
    return read_json(path, TokenizerError, expect=dict)


# ----------------------------------------------------------------------------------------------------------------
# ALBERT SentencePiece


def _for_every_id(method, ids: list[int]) -> list:
    """A SentencePiece per-id method over a vocabulary's ids: one call on the whole list where SentencePiece takes
    lists (0.2: the loop runs in C++, ~4x faster than 30,000 Python calls: tokenizer loading is a fixed cost of
    every `data build`), else one call per id."""
    try:
        out = method(ids)
    except TypeError:
        out = None
    return out if isinstance(out, list) and len(out) == len(ids) else [method(i) for i in ids]


class AlbertTokenizer(_TokenizerBase):
    """The official ALBERT tokenizer: preprocess_text + SentencePiece + the digit-comma re-split."""

    tokenizer_class = "AlbertTokenizer"
    vocab_file_name = "spiece.model"
    setting_names = ("do_lower_case", "keep_accents", "remove_space")
    json_kind, bytes_argument = "spm", "model_proto"  # how a tokenizer.json of this kind is read

    def __init__(self, model_file: str | os.PathLike, do_lower_case: bool = True, keep_accents: bool = False,
                 remove_space: bool = True, model_proto: bytes | None = None):
        """model_proto: the serialized SentencePiece model when it comes from elsewhere (rebuilt from a
        transformers-5 tokenizer.json at model_file); default: read model_file."""
        import sentencepiece as spm

        self.vocab_file = Path(model_file)
        self._vocab_bytes = model_proto
        if model_proto is None and not self.vocab_file.is_file():
            raise TokenizerError(f"{self.vocab_file}: SentencePiece model file not found")
        self.sp = spm.SentencePieceProcessor()
        try:
            if model_proto is None:
                self.sp.load(str(self.vocab_file))
            else:
                self.sp.load_from_serialized_proto(model_proto)
        except (RuntimeError, OSError) as exc:
            raise TokenizerError(f"{self.vocab_file}: not a valid SentencePiece model ({exc})") from None
        self.do_lower_case, self.keep_accents, self.remove_space = do_lower_case, keep_accents, remove_space
        self.vocab_size = self.sp.get_piece_size()
        ids, sp = list(range(self.vocab_size)), self.sp
        self._pieces = _for_every_id(sp.id_to_piece, ids)
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            self._required_id(p) for p in ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"))
        kinds = [_for_every_id(f, ids) for f in (sp.is_control, sp.is_unknown, sp.is_unused)]  # 3 x [V] bool
        self.special_ids = frozenset({i for i, flags in enumerate(zip(*kinds)) if any(flags)}
                                     | {self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id})
        self._comma_fix = self._digit_comma_table()
        self._comma_fix_by_id = {self.sp.piece_to_id(p): ids for p, (_, ids) in self._comma_fix.items()}
        self._comma_fix_ids = frozenset(self._comma_fix_by_id)
        self._word_start = None

    def _required_id(self, piece: str) -> int:
        i = self.sp.piece_to_id(piece)
        if self._pieces[i] != piece:
            raise TokenizerError(f"{self.vocab_file}: the model has no {piece} piece; ALBERT needs <pad> <unk> [CLS] "
                                 f"[SEP] [MASK] (train one with `litebert tokenizer train`)")
        return i

    def _digit_comma_table(self) -> dict[str, tuple[list[str], list[int]]]:
        """Official encode_pieces: a piece like "▁1999," (digit then comma) is re-encoded without the comma and
        the comma appended. The result depends only on the piece, so precompute it for every such piece:
        piece -> (replacement pieces, their ids)."""
        table = {}
        for piece in self._pieces:
            if is_comma_piece(piece):
                sub = self.sp.encode(piece[:-1].replace(SPIECE_UNDERLINE, ""), out_type=str)
                # The intent of the official code (and what it does on Python 2): a piece that did not start a
                # word must not start one after the re-split. (30k-clean has no such piece: all 141 start with ▁.)
                if piece[0] != SPIECE_UNDERLINE and sub and sub[0][0] == SPIECE_UNDERLINE:
                    sub = sub[1:] if len(sub[0]) == 1 else [sub[0][1:], *sub[1:]]
                sub.append(",")
                table[piece] = (sub, [self.sp.piece_to_id(p) for p in sub])
        return table

    # -- encoding ----------------------------------------------------------------------------------------------
    def normalize(self, text: str) -> str:
        return preprocess_text(text, self.remove_space, self.do_lower_case, self.keep_accents)

    def _fix_row(self, row: list[int]) -> list[int]:
        if self._comma_fix_ids.isdisjoint(row):
            return row
        out = []
        for i in row:
            fix = self._comma_fix_by_id.get(i)
            if fix:
                out.extend(fix)
            else:
                out.append(i)
        return out

    def _sp_encode(self, normalized: str | list[str], **kwargs):
        try:
            return self.sp.encode(normalized, **kwargs)
        except (RuntimeError, TypeError):
            for k, text in enumerate([normalized] if isinstance(normalized, str) else normalized):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise TokenizerError(f"text {k}: unpaired surrogate at char {exc.start} cannot be tokenized "
                                         f"(decode the input with errors='replace')") from None
            raise

    def encode_ids(self, text: str) -> list[int]:
        return self._fix_row(self._sp_encode(self.normalize(text)))

    def encode_ids_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """The fast path: Python normalisation, then SentencePiece's C++ batch encoder (num_threads threads,
        default all cores); only rows holding a digit-comma piece are touched again in Python."""
        rows = self._sp_encode([self.normalize(t) for t in texts], num_threads=num_threads or -1)
        return [self._fix_row(r) for r in rows]

    def tokenize(self, text: str) -> list[str]:
        """Pieces as the official FullTokenizer gives them (an unknown piece shows its text, not <unk>)."""
        out = []
        for piece in self._sp_encode(self.normalize(text), out_type=str):
            fix = self._comma_fix.get(piece)
            if fix:
                out.extend(fix[0])
            else:
                out.append(piece)
        return out

    def _aligned_normalize(self, text: str) -> _Aligned:
        al = _Aligned(text)
        if self.remove_space:
            al = al.collapse_whitespace()
        if not self.keep_accents:
            al = al.rewrite(_strip_nfkd)  # per-char NFKD == NFKD once the combining marks are dropped
        return al.lower() if self.do_lower_case else al

    def _encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        al = self._aligned_normalize(text)
        ids, pieces = self._sp_encode(al.text), self.sp.encode(al.text, out_type=str)
        begins, ends = self._piece_spans(al.text, pieces)
        if not self._comma_fix_ids.isdisjoint(ids):
            ids, begins, ends = self._split_digit_commas(ids, pieces, begins, ends)
        return ids, al.spans(begins, ends)

    def _piece_spans(self, norm: str, pieces: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """[begin, end) of each piece in `norm` chars, without the space that a "▁word" piece stands on."""
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))  # [T]
        joined, spaced = "".join(pieces), norm.replace(" ", SPIECE_UNDERLINE)
        if joined in (spaced, SPIECE_UNDERLINE + spaced):
            # The usual case: the pieces spell `norm` (plus the dummy-prefix "▁"), so lengths give positions.
            ends = np.cumsum(lengths) - (len(joined) - len(spaced))
            begins = np.maximum(ends - lengths, 0)
        else:
            # SentencePiece's own normaliser changed something: ask it for UTF-8 byte offsets (slower).
            nbytes = 1 + (_code_points(norm)[:, None] >= np.array([0x80, 0x800, 0x10000])).sum(1)
            char_at = np.append(np.repeat(np.arange(len(norm)), nbytes), len(norm))
            proto = self.sp.encode(norm, return_type="proto").pieces
            begins = char_at[np.array([p.begin for p in proto], dtype=np.int64)]
            ends = char_at[np.array([p.end for p in proto], dtype=np.int64)]
        space = np.append(np.isin(_code_points(norm), _space_code_points()), False)
        while (trim := (begins < ends - 1) & space[begins]).any():
            begins = begins + trim
        return begins, ends

    def _split_digit_commas(self, ids, pieces, begins, ends):
        """Apply the digit-comma re-split, laying the new pieces over the old piece's text left to right."""
        out_ids, out_begins, out_ends = [], [], []
        for i, piece, a, b in zip(ids, pieces, begins.tolist(), ends.tolist()):
            fix = self._comma_fix.get(piece)
            for sub, sub_id in zip(*fix) if fix else [(piece, i)]:
                n = len(sub.lstrip(SPIECE_UNDERLINE)) if fix else b - a
                out_ids.append(sub_id)
                out_begins.append(min(a, b))
                out_ends.append(min(a + n, b))
                a += n
        return out_ids, out_begins, out_ends

    def tokenizer_json(self) -> dict | None:
        """The tokenizers-library file that makes transformers tokenize as we do (None for a SentencePiece model
        that library cannot reproduce, e.g. a BPE one: transformers then converts spiece.model itself)."""
        proto = read_spm_proto(self.vocab_bytes(), self.vocab_file)
        preprocess = preprocess_steps(self.remove_space, self.do_lower_case, self.keep_accents)
        return unigram_tokenizer_json(proto, preprocess, set(self._comma_fix_by_id), ("[CLS]", self.cls_id),
                                      ("[SEP]", self.sep_id))

    def id_to_token(self, i: int) -> str:
        return self._pieces[i]

    def token_to_id(self, token: str) -> int:
        return self.sp.piece_to_id(token)

    def _join_tokens(self, tokens: list[str]) -> str:
        return "".join(tokens).replace(SPIECE_UNDERLINE, " ").strip()

    def _is_word_start(self, piece: str) -> bool:
        # A piece starts a word when SentencePiece put a "▁" (word boundary) in front of it, when it is all
        # punctuation (as BERT's basic tokenizer splits punctuation off), or when it begins with a CJK character
        # (each CJK character is a word, as in WordPiece). The official _is_start_piece_sp also calls every piece
        # with a character outside a-z a word start, which turns whole-word masking into piece masking for
        # digits ("▁12" "34") and non-Latin scripts; that defect is fixed here.
        if not piece:
            return True
        return (piece.startswith(SPIECE_UNDERLINE) or all(_is_punctuation(c) for c in piece)
                or bool(_CJK_RE.match(piece)))

    def settings(self) -> dict:
        return {"do_lower_case": self.do_lower_case, "keep_accents": self.keep_accents,
                "remove_space": self.remove_space}

    def special_tokens(self) -> dict:
        return {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
                "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": "[MASK]"}


# ----------------------------------------------------------------------------------------------------------------
# BERT WordPiece (Chinese ALBERT models)


@lru_cache(maxsize=1 << 16)
def _bert_clean(c: str) -> str:
    """BasicTokenizer._clean_text for one char: drop NUL, U+FFFD and controls; whitespace (Zs, \\t\\n\\r) -> " "."""
    if c in "\x00\ufffd" or (c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf")):
        return ""
    return " " if c in " \t\n\r" or unicodedata.category(c) == "Zs" else c


def _is_punctuation(c: str) -> bool:
    return unicodedata.category(c).startswith("P") or (c.isascii() and not c.isalnum() and not c.isspace())


# CJK Unified Ideographs blocks, as BERT's _is_chinese_char lists them.
_CJK = "\u4e00-\u9fff\u3400-\u4dbf\U00020000-\U0002a6df\U0002a700-\U0002b73f\U0002b740-\U0002b81f" \
       "\U0002b820-\U0002ceaf\uf900-\ufaff\U0002f800-\U0002fa1f"
_CJK_RE = re.compile(f"[{_CJK}]")


@cache
def _bert_token_re() -> re.Pattern:
    """One BasicTokenizer token: a CJK char, a punctuation char (all non-alphanumeric ASCII plus Unicode P*),
    or a run of anything else up to whitespace."""
    punct = "".join(re.escape(chr(cp)) for cp in range(0x110000)
                    if unicodedata.category(chr(cp)).startswith("P") and cp > 126)
    punct += re.escape("".join(chr(cp) for cp in (*range(33, 48), *range(58, 65), *range(91, 97), *range(123, 127))))
    return re.compile(f"[{_CJK}]|[{punct}]|[^\\s{_CJK}{punct}]+")


class WordPieceTokenizer(_TokenizerBase):
    """BERT basic tokenization (clean, CJK chars split out, punctuation split, optional lower-case + accent
    strip) followed by greedy longest-match WordPiece with "##" continuations."""

    tokenizer_class = "BertTokenizer"
    vocab_file_name = "vocab.txt"
    REQUIRED_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # pad, unk, cls, sep, mask: every vocab has them
    setting_names = ("do_lower_case", "strip_accents")
    json_kind, bytes_argument = "wordpiece", "vocab_bytes"  # how a tokenizer.json of this kind is read
    _SPECIAL = re.compile(r"^\[[^\[\]]+\]$|^<[^<>]+>$")  # [PAD] [unused7] <S>: never produced from text
    _CACHE_SIZE = 200_000

    def __init__(self, vocab_file: str | os.PathLike, do_lower_case: bool = True, strip_accents: bool | None = None,
                 max_input_chars_per_word: int = 100, vocab_bytes: bytes | None = None):
        """vocab_bytes: the vocab.txt content when it comes from elsewhere (a transformers-5 tokenizer.json at
        vocab_file); default: read vocab_file."""
        self.vocab_file = Path(vocab_file)
        self.vocab = self._load_vocab(self.vocab_file, vocab_bytes)
        self._vocab_bytes = vocab_bytes
        self.tokens = list(self.vocab)
        self.vocab_size = len(self.tokens)
        self.do_lower_case, self.strip_accents = do_lower_case, strip_accents
        self._strip = do_lower_case if strip_accents is None else strip_accents
        self.max_input_chars_per_word = max_input_chars_per_word  # HF's 100; the official file uses 200
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            self._required_id(t) for t in self.REQUIRED_TOKENS)
        self.special_ids = frozenset(i for i, t in enumerate(self.tokens) if self._SPECIAL.match(t))
        self._cache: dict[str, list[tuple[int, int, int]]] = {}
        self._word_start = None

    @staticmethod
    def _load_vocab(path: Path, content: bytes | None = None) -> dict[str, int]:
        if content is None and not path.is_file():
            raise TokenizerError(f"{path}: WordPiece vocab file not found")
        try:
            lines = (path.read_bytes() if content is None else content).decode("utf-8").split("\n")
        except (UnicodeDecodeError, OSError) as exc:
            raise TokenizerError(f"{path}: cannot read the vocab as UTF-8 text ({exc})") from None
        if lines and lines[-1] == "":
            lines.pop()
        vocab: dict[str, int] = {}
        for lineno, line in enumerate(lines, 1):
            token = line.rstrip("\r")
            if token in vocab:
                raise TokenizerError(f"{where(path, lineno)}: duplicate token {token!r} (first on line "
                                     f"{vocab[token] + 1}); ids must equal line numbers")
            vocab[token] = lineno - 1
        if not vocab:
            raise TokenizerError(f"{path}: empty vocab")
        return vocab

    def _required_id(self, token: str) -> int:
        if token not in self.vocab:
            raise TokenizerError(f"{self.vocab_file}: the vocab has no {token} token (a BERT vocab.txt needs "
                                 f"[PAD] [UNK] [CLS] [SEP] [MASK])")
        return self.vocab[token]

    def _wordpiece(self, token: str) -> list[tuple[int, int, int]]:
        """Greedy longest-match-first: [(id, char start, char end)] within `token`; one [UNK] over it all when
        it is too long or some suffix matches nothing."""
        out = self._cache.get(token)
        if out is not None:
            return out
        n = len(token)
        out, start = [], 0
        while start < n and n <= self.max_input_chars_per_word:
            for end in range(n, start, -1):
                sub = token[start:end] if start == 0 else "##" + token[start:end]
                if sub in self.vocab:
                    out.append((self.vocab[sub], start, end))
                    start = end
                    break
            else:
                break
        if start < n:
            out = [(self.unk_id, 0, n)]
        if len(self._cache) >= self._CACHE_SIZE:
            self._cache.clear()
        self._cache[token] = out
        return out

    def normalize(self, text: str) -> str:
        """The text BasicTokenizer splits: cleaned, lower-cased and accent-stripped as configured."""
        return self._aligned_normalize(text).text

    def _aligned_normalize(self, text: str) -> _Aligned:
        # BasicTokenizer cleans, then lower-cases and strips accents per whitespace token. Doing the last two on
        # the whole text is the same: lower()'s only context rule (final sigma) stops at whitespace and CJK.
        al = _Aligned(text).rewrite(_bert_clean, inspect=lambda cps: (cps < 32) | (cps >= 127))
        if self.do_lower_case:
            al = al.lower()
        return al.rewrite(_strip_nfd) if self._strip else al

    def _encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        al = self._aligned_normalize(text)
        ids, begins, ends = [], [], []
        for m in _bert_token_re().finditer(al.text):  # CJK chars and punctuation split out, whitespace dropped
            for tid, a, b in self._wordpiece(m.group()):
                ids.append(tid)
                begins.append(m.start() + a)
                ends.append(m.start() + b)
        return ids, al.spans(begins, ends)

    def encode_ids(self, text: str) -> list[int]:
        return self._encode_offsets(text)[0]

    def id_to_token(self, i: int) -> str:
        return self.tokens[i]

    def token_to_id(self, token: str) -> int:
        return self.vocab.get(token, self.unk_id)

    def _join_tokens(self, tokens: list[str]) -> str:
        return " ".join(tokens).replace(" ##", "")

    def _is_word_start(self, token: str) -> bool:
        return not token.startswith("##")

    def settings(self) -> dict:
        return {"do_lower_case": self.do_lower_case, "strip_accents": self.strip_accents,
                "max_input_chars_per_word": self.max_input_chars_per_word}

    def special_tokens(self) -> dict:
        return {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
                "mask_token": "[MASK]"}


def load_tokenizer(path: str | os.PathLike) -> AlbertTokenizer | WordPieceTokenizer:
    """A tokenizer dir (ours or Hugging Face's, or a Hub id in the local Hub cache), or a bare spiece.model /
    vocab.txt file."""
    path = resolve_model_path(path, TokenizerError)
    if path.is_file():
        if path.suffix == ".txt":
            return WordPieceTokenizer(path)
        return AlbertTokenizer(path)
    if not path.is_dir():
        raise TokenizerError(f"{path}: no such tokenizer directory or file")
    name = str(_read_config(path).get("tokenizer_class", "")).removesuffix("Fast")
    by_name = {"AlbertTokenizer": AlbertTokenizer, "BertTokenizer": WordPieceTokenizer}
    if name in by_name:
        return by_name[name].from_pretrained(path)
    for cls in (AlbertTokenizer, WordPieceTokenizer):
        if (path / cls.vocab_file_name).is_file():
            return cls.from_pretrained(path)
    if (path / TOKENIZER_JSON).is_file():  # transformers 5 saves only tokenizer.json
        kind = read_tokenizer_json(path)[0]
        return next(c for c in (AlbertTokenizer, WordPieceTokenizer) if c.json_kind == kind).from_pretrained(path)
    raise TokenizerError(f"{path}: no spiece.model, vocab.txt or tokenizer.json (expected a dir written by "
                         f"save_pretrained or `litebert tokenizer train`)")
