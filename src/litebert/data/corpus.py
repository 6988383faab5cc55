"""Reading raw text corpora: files, folders and globs; .gz/.bz2/.xz; plain text and JSONL; sentence splitting.

Two input formats, picked by file name (after any compression suffix):

* plain text (any name but `.jsonl`/`.json`): one sentence per line, blank line between documents, as the official
  `create_pretraining_data.py` expects. Unlike the official script, the end of a file also ends a document.
* JSONL (`.jsonl`, `.json`): one JSON object per line holding one whole document in its `text` field; the built-in
  `split_sentences` cuts it into sentences (English `. ! ?` with abbreviations and quotes, Chinese `。！？；…`).

The reader streams: it hands out `Chunk`s of about `chunk_bytes` of text, so memory stays flat however big the
corpus is. Every document gets a global ordinal (`doc_id`) in input order; a long plain-text document may span
several chunks, which is why each text carries its document's ordinal rather than chunks being whole documents.

Bad input is never skipped silently: invalid UTF-8 raises `CorpusError` naming file:line unless the caller picked
`on_bad_utf8="replace"` or `"skip"`, and then it is counted in `ReadStats`.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import hashlib
import lzma
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from collections.abc import Iterator

from litebert.errors import CorpusError, DataFormatError, where
from litebert.files import parse_json

BAD_UTF8_POLICIES = ("error", "replace", "skip")
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_JSONL_SUFFIXES = {".jsonl", ".json"}
_READ_HINT = 1 << 20  # bytes of lines read (and decoded) at once


# ---------------------------------------------------------------------------------------------------------------
# Sentence splitting (for JSONL documents)

# Words that end in "." without ending a sentence. Lower-case, without the dot.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt ft vs no nos vol vols fig figs ed eds gen gov sen rep capt col lt sgt cpl maj "
    "adm rev hon messrs mme mlle inc ltd co corp bros dept est approx ca cf al op pp jan feb mar apr jun jul aug "
    "sep sept oct nov dec e.g i.e a.m p.m u.s u.k".split()
)
# A terminator, then closing quotes/brackets, then the whitespace after it.
_TERMINATOR = re.compile(r"(…+|\.{2,}|[。！？；]+|[.!?]+)([\"'”’»」』）)\]】》]*)(\s*)")
_ACRONYM = re.compile(r"[a-z](?:\.[a-z])+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")


def _word_before(text: str, pos: int) -> str:
    """The whitespace-delimited word ending at pos, lower-cased, without opening quotes (looks back 24 chars)."""
    window = text[max(0, pos - 24) : pos].split()
    return window[-1].lstrip("\"'“‘([").lower() if window else ""


def _ends_sentence(text: str, match: re.Match) -> bool:
    """Whether the terminator in `match` ends a sentence."""
    terminator, _closers, space = match.groups()
    end = match.end()
    if end >= len(text) or terminator[0] in "。！？；":
        return True
    following = text[end]
    if not space:  # "好!我们" ends a sentence; "3.14" and "U.S.A" do not
        return terminator[0] in "!?…" and _CJK.match(following) is not None
    if following.islower():
        return False  # '"Stop!" he said.' / 'e.g. the ...'
    if terminator == ".":
        word = _word_before(text, match.start())
        # an abbreviation, an initial ("J. R. R."), or a dotted acronym ("U.S.")
        if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()) or _ACRONYM.fullmatch(word):
            return False
    return True


def split_sentences(text: str) -> list[str]:
    """Cut a document into sentences. Newlines always end a sentence; returns stripped, non-empty sentences.

    >>> split_sentences('Mr. Smith went to Washington. He said "Hi!" Then he left.')
    ['Mr. Smith went to Washington.', 'He said "Hi!"', 'Then he left.']
    >>> split_sentences("今天天气很好。我们去公园吧！好的")
    ['今天天气很好。', '我们去公园吧！', '好的']
    """
    sentences: list[str] = []
    for line in text.split("\n"):
        start = 0
        for match in _TERMINATOR.finditer(line):
            if _ends_sentence(line, match):
                piece = line[start : match.end()].strip()
                if piece:
                    sentences.append(piece)
                start = match.end()
        piece = line[start:].strip()
        if piece:
            sentences.append(piece)
    return sentences


# ---------------------------------------------------------------------------------------------------------------
# Input discovery and opening


def expand_inputs(inputs: list[str | os.PathLike] | str | os.PathLike) -> list[Path]:
    """Files named by `inputs` (files, folders searched recursively, glob patterns), sorted within each entry.

    Raises CorpusError for a path that does not exist, a glob that matches nothing, or no files at all.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    files: list[Path] = []
    for item in inputs:
        text = os.fspath(item)
        path = Path(text)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            if not found:
                raise CorpusError(f"{path}: folder holds no files")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif glob.has_magic(text):
            found = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
            if not found:
                raise CorpusError(f"{text}: pattern matches no files")
            files.extend(found)
        else:
            raise CorpusError(f"{path}: no such file or folder (check --input)")
    if not files:
        raise CorpusError("no input files given (use --input PATH...)")
    return files


def _suffixes(path: Path) -> tuple[str, str]:
    """(compression suffix or '', format suffix) of a file name, e.g. ('.gz', '.jsonl') for 'a.jsonl.gz'."""
    suffixes = [s.lower() for s in path.suffixes]
    compression = suffixes[-1] if suffixes and suffixes[-1] in _OPENERS else ""
    rest = suffixes[:-1] if compression else suffixes
    return compression, (rest[-1] if rest else "")


def open_binary(path: Path) -> IO[bytes]:
    """Open a file for reading bytes, decompressing .gz/.bz2/.xz on the fly."""
    compression, _ = _suffixes(path)
    try:
        return _OPENERS.get(compression, open)(path, "rb")
    except OSError as exc:
        raise CorpusError(f"{path}: cannot open ({exc.strerror or exc})") from exc


def is_jsonl(path: Path) -> bool:
    return _suffixes(path)[1] in _JSONL_SUFFIXES


# ---------------------------------------------------------------------------------------------------------------
# Streaming reader


@dataclass
class Chunk:
    """A batch of texts for one tokenizer call. kind "sentences": each text is one sentence; kind "documents":
    each text is a whole JSONL document still to be cut into sentences. doc_ids[i] is the ordinal of texts[i]'s
    document in the whole corpus (non-decreasing)."""

    kind: str
    texts: list[str]
    doc_ids: list[int]
    num_bytes: int = 0  # size of the text (characters), for chunk sizing and progress


@dataclass
class ReadStats:
    files: int = 0
    bytes: int = 0  # decompressed bytes read
    lines: int = 0
    documents: int = 0  # documents with at least one non-blank line / non-empty text
    bad_utf8_lines: int = 0  # replaced or skipped, per on_bad_utf8
    empty_records: int = 0  # JSONL records whose text is empty or blank
    documents_cut: int = 0  # cuts made by max_doc_sentences
    file_info: list[dict] = field(default_factory=list)  # path, bytes, sha256 of the decompressed content


class CorpusReader:
    """Streams a corpus as `Chunk`s; fills `stats` as it goes (complete once iteration ends)."""

    def __init__(self, inputs, on_bad_utf8: str = "error", chunk_bytes: int = 1 << 20, text_field: str = "text",
                 max_doc_sentences: int = 0):
        if on_bad_utf8 not in BAD_UTF8_POLICIES:
            raise CorpusError(f"on_bad_utf8={on_bad_utf8!r}: use one of {', '.join(BAD_UTF8_POLICIES)}")
        self.files = expand_inputs(inputs)
        self.on_bad_utf8 = on_bad_utf8
        self.chunk_bytes = chunk_bytes
        self.text_field = text_field
        # Plain-text documents longer than this many sentences are cut into pieces (0: never). Books given as one
        # sentence per line with no blank lines are one document each; cutting them gives SOP/NSP pairs and a
        # validation split by document something to work with.
        self.max_doc_sentences = max_doc_sentences
        self.stats = ReadStats()

    # -- blocks of lines ----------------------------------------------------------------------------------------
    def _blocks(self, path: Path) -> Iterator[tuple[int, list[str | None]]]:
        """(number of the first line, decoded lines without newlines) per ~1 MB block of a file; a line dropped
        by on_bad_utf8="skip" is None (it keeps its number). Hashes the raw bytes for meta.json."""
        sha = hashlib.sha256()
        size = lineno = 0
        with open_binary(path) as f:
            while True:
                try:
                    raw_lines = f.readlines(min(self.chunk_bytes, _READ_HINT))
                except (OSError, EOFError, lzma.LZMAError, zlib.error) as exc:  # truncated or corrupt archive
                    raise CorpusError(f"{where(path, lineno + 1)}: cannot read ({exc})") from exc
                if not raw_lines:
                    break
                block = b"".join(raw_lines)
                sha.update(block)
                size += len(block)
                try:  # fast path: the whole block is valid UTF-8
                    lines: list[str | None] = block.decode("utf-8").split("\n")
                    if block.endswith(b"\n"):
                        lines.pop()
                except UnicodeDecodeError:
                    lines = list(self._decode_each(path, raw_lines, lineno))
                if lineno == 0 and lines and lines[0] is not None and lines[0].startswith("\ufeff"):
                    lines[0] = lines[0][1:]  # UTF-8 byte-order mark
                yield lineno + 1, lines
                lineno += len(lines)
        self.stats.files += 1
        self.stats.bytes += size
        self.stats.lines += lineno
        self.stats.file_info.append({"path": str(path), "bytes": size, "sha256": sha.hexdigest()})

    def _decode_each(self, path: Path, raw_lines: list[bytes], lineno: int) -> Iterator[str | None]:
        for i, raw in enumerate(raw_lines, start=lineno + 1):
            try:
                yield raw.decode("utf-8").rstrip("\n")
            except UnicodeDecodeError as exc:
                if self.on_bad_utf8 == "error":
                    raise CorpusError(
                        f"{where(path, i)}: invalid UTF-8 at byte {exc.start} of the line "
                        "(use --on-bad-utf8 replace|skip to keep going)"
                    ) from None
                self.stats.bad_utf8_lines += 1
                yield raw.decode("utf-8", errors="replace").rstrip("\n") if self.on_bad_utf8 == "replace" else None

    # -- chunks --------------------------------------------------------------------------------------------------
    def chunks(self) -> Iterator[Chunk]:
        """The corpus as chunks of about chunk_bytes of text (each chunk holds one kind of text)."""
        self.stats = ReadStats()
        self._doc_id = 0  # ordinal of the next document
        self._doc_len = 0  # sentences in the open document
        chunk = None
        for path in self.files:
            kind = "documents" if is_jsonl(path) else "sentences"
            add = self._add_jsonl if kind == "documents" else self._add_plain
            self._open_doc = False
            for first_line, lines in self._blocks(path):
                if chunk is not None and (chunk.kind != kind or chunk.num_bytes >= self.chunk_bytes):
                    if chunk.texts:
                        yield chunk
                    chunk = None
                if chunk is None:
                    chunk = Chunk(kind, [], [])
                add(chunk, path, first_line, lines)
            if self._open_doc:  # the end of a file ends its last document
                self._doc_id += 1
                self._doc_len = 0
        if chunk is not None and chunk.texts:
            yield chunk
        self.stats.documents = self._doc_id

    def _add_plain(self, chunk: Chunk, path: Path, first_line: int, lines: list[str | None]) -> None:
        """One sentence per line; a run of blank lines ends the document."""
        stripped = [line.strip() for line in lines if line is not None]
        blanks = [i for i, line in enumerate(stripped) if not line]
        prev = 0
        for blank in blanks + [len(stripped)]:
            self._add_sentences(chunk, stripped[prev:blank])
            if blank < len(stripped) and self._open_doc:
                self._doc_id += 1
                self._doc_len = 0
                self._open_doc = False
            prev = blank + 1

    def _add_sentences(self, chunk: Chunk, sentences: list[str]) -> None:
        while sentences:
            room = self.max_doc_sentences - self._doc_len if self.max_doc_sentences else len(sentences)
            if room <= 0:  # the open document is full: cut here
                self._doc_id += 1
                self._doc_len = 0
                self.stats.documents_cut += 1
                continue
            take, sentences = sentences[:room], sentences[room:]
            chunk.texts.extend(take)
            chunk.doc_ids.extend([self._doc_id] * len(take))
            chunk.num_bytes += sum(map(len, take)) + len(take)
            self._doc_len += len(take)
            self._open_doc = True

    def _add_jsonl(self, chunk: Chunk, path: Path, first_line: int, lines: list[str | None]) -> None:
        """One document per line, in the text field."""
        for lineno, line in enumerate(lines, start=first_line):
            if line is None or not line.strip():
                continue
            record = parse_json(line, path, DataFormatError, line=lineno)
            text = record.get(self.text_field) if isinstance(record, dict) else None
            if not isinstance(text, str):
                raise DataFormatError(
                    f"{where(path, lineno)}: expected a JSON object with a string field {self.text_field!r}")
            if not text.strip():
                self.stats.empty_records += 1
                continue
            chunk.texts.append(text)
            chunk.doc_ids.append(self._doc_id)
            chunk.num_bytes += len(text) + 1
            self._doc_id += 1

    def documents(self) -> Iterator[list[str]]:
        """Each document as a list of sentences (JSONL documents cut by split_sentences). For inspection/tests."""
        current: list[str] = []
        current_id = -1
        for chunk in self.chunks():
            for text, doc_id in zip(chunk.texts, chunk.doc_ids):
                if doc_id != current_id and current:
                    yield current
                    current = []
                current_id = doc_id
                current.extend(split_sentences(text) if chunk.kind == "documents" else [text])
        if current:
            yield current


def read_documents(inputs, on_bad_utf8: str = "error") -> list[list[str]]:
    """All documents of a (small) corpus, each a list of sentences."""
    return list(CorpusReader(inputs, on_bad_utf8=on_bad_utf8).documents())
