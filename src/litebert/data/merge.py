"""A token store built by many machines: each builds one part, then a merge makes the parts one store.

    litebert data build --input CORPUS... --tokenizer T --out parts/3 --shard 3/8     # on machine 3 of 8
    litebert data merge parts/0 parts/1 ... parts/7 --out STORE                       # once, anywhere

Every machine lists the same input files (same paths, same sizes: a shared file system or identical copies) and
takes a contiguous range of them, the ranges balanced by bytes. The validation split hashes each document's
ordinal in the whole corpus, so a part first counts the documents of the files before its range, without
tokenizing them (plain text: a fast count of runs of non-blank lines), to number its first document, and routes its
documents exactly as a single build would. The merge checks that the parts belong together (same listing, tokenizer and settings, all N
of them once, document numbering that follows on), then moves each part directory under STORE/parts/ and writes
one meta.json whose shard list runs through the parts in order. No token is copied: the merge costs renames, and
the store reads exactly like a single-machine build of the same files (same documents in the same order, same
validation split, same stats.json); only the shard boundaries differ, which readers never see.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import lzma
import multiprocessing
import os
import shutil
import zlib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from litebert.data.corpus import _READ_HINT, CorpusReader, expand_inputs, is_jsonl, open_binary
from litebert.data.store import SPLITS, TokenStore
from litebert.data.store_build import (_swap_into_place, _write_json, build_store, check_usable, split_warnings,
                                       writing_store)
from litebert.errors import CorpusError
from litebert.files import OUTPUT_ERRNOS, disk_error, fsync_dir, reason, sha256_file


def parse_shard(spec: str) -> tuple[int, int]:
    """'3/8' -> (3, 8)."""
    try:
        index, count = (int(x) for x in spec.split("/"))
    except ValueError:
        index = count = -1
    if not 0 <= index < count:
        raise CorpusError(f"--shard {spec!r}: expected I/N with 0 <= I < N (e.g. 0/4 for the first of 4 parts)")
    return index, count


def plan_parts(inputs, count: int) -> tuple[list[list[Path]], str]:
    """The input files cut into `count` contiguous ranges of about equal bytes, and a digest of the listing
    (paths and sizes) that every part records, so the merge can tell parts of different listings apart."""
    files = expand_inputs(inputs)
    sizes = [f.stat().st_size for f in files]
    total = max(sum(sizes), 1)
    ranges: list[list[Path]] = [[] for _ in range(count)]
    before = 0
    for f, size in zip(files, sizes):  # a file goes to the part its middle byte falls in
        ranges[min(count - 1, (2 * before + size) * count // (2 * total))].append(f)
        before += size
    listing = hashlib.sha256("".join(f"{f}\t{n}\n" for f, n in zip(files, sizes)).encode()).hexdigest()
    return ranges, listing


def count_documents(files: list[Path], on_bad_utf8: str, max_doc_sentences: int, workers: int = 1) -> int:
    """The document ordinals a build of `files` uses (what CorpusReader numbers), without tokenizing. Files start
    their own documents, so this is a sum over files, counted in `workers` processes: plain text by a fast count
    of its runs of non-blank lines, anything else (JSONL, documents cut by max_doc_sentences, bad UTF-8) by the
    reader itself."""
    count = functools.partial(_count_file, on_bad_utf8=on_bad_utf8, max_doc_sentences=max_doc_sentences)
    if workers <= 1 or len(files) <= 1:
        return sum(map(count, files))
    context = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                          else "spawn")
    with ProcessPoolExecutor(min(workers, len(files)), mp_context=context) as pool:
        return sum(pool.map(count, files))


def _count_file(path: Path, on_bad_utf8: str, max_doc_sentences: int) -> int:
    fast = None if is_jsonl(path) or max_doc_sentences else _count_plain_documents(path)
    if fast is None:
        reader = CorpusReader([path], on_bad_utf8=on_bad_utf8, max_doc_sentences=max_doc_sentences)
        for _ in reader.chunks():
            pass
        fast = reader.stats.documents
    return fast


def _count_plain_documents(path: Path) -> int | None:
    """Runs of lines that are not blank (after str.strip, as CorpusReader sees them) in a plain-text file; None
    when the file cannot be read as UTF-8 (the reader then applies --on-bad-utf8 and words the error)."""
    documents, previous_blank, first = 0, True, True
    try:
        with open_binary(path) as f:
            while raw := f.readlines(_READ_HINT):
                text = b"".join(raw).decode("utf-8")
                if first:
                    text, first = text.removeprefix("\ufeff"), False
                lines = text.split("\n")
                if text.endswith("\n"):
                    lines.pop()
                blank = np.fromiter((not line.strip() for line in lines), bool, len(lines))  # [L]
                starts = ~blank & np.r_[previous_blank, blank[:-1]]  # a non-blank line after a blank one
                documents += int(starts.sum())
                previous_blank = bool(blank[-1]) if len(blank) else previous_blank
    except (UnicodeDecodeError, OSError, EOFError, lzma.LZMAError, zlib.error):
        return None
    return documents


def build_part(inputs, tokenizer, out, index: int, count: int, *, on_bad_utf8: str = "error",
               max_doc_sentences: int = 0, **build_kwargs) -> TokenStore:
    """Build part `index` of `count` of the store of `inputs` (build_store's other options pass through)."""
    ranges, listing = plan_parts(inputs, count)
    if not ranges[index]:
        raise CorpusError(f"--shard {index}/{count}: no input file falls to this part ({sum(map(len, ranges))} "
                          "file(s) in all, cut into ranges of about equal bytes); use fewer parts or split the "
                          "corpus into more files")
    offset = count_documents([f for r in ranges[:index] for f in r], on_bad_utf8, max_doc_sentences,
                             build_kwargs.get("workers", 1))
    # The listing digest holds paths and sizes only: two machines with different texts of equal sizes would agree
    # on it. The content checksum of every file this part reads (those before its range are read to count their
    # documents) lets the merge tell (sha256, over the same bytes the reader sees).
    read = [f for r in ranges[: index + 1] for f in r]
    part = {"index": index, "count": count, "listing_sha256": listing, "doc_offset": offset,
            "file_sha256": [sha256_file(f) for f in read]}
    return build_store(ranges[index], tokenizer, out, on_bad_utf8=on_bad_utf8, max_doc_sentences=max_doc_sentences,
                       doc_offset=offset, part=part, **build_kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Merge


def _settings(meta: dict) -> dict:
    """What must be equal across parts: the tokenizer, the token dtype, the build settings but the inputs."""
    return {"dtype": meta["dtype"], "tokenizer": meta["tokenizer"],
            "build": {k: v for k, v in meta["build"].items() if k != "inputs"},
            "part": {k: meta["part"][k] for k in ("count", "listing_sha256")}}


def _add_counts(total, more, where: str):
    """Sum two stats.json trees: numbers add up, texts must agree."""
    if isinstance(total, dict):
        if total.keys() != more.keys():
            raise CorpusError(f"{where}: stats.json fields differ between parts")
        return {k: _add_counts(total[k], more[k], f"{where}.{k}") for k in total}
    if isinstance(total, (int, float)) and not isinstance(total, bool):
        return total + more
    return total


def _open_parts(parts: list[Path]) -> list[TokenStore]:
    stores = []
    for path in parts:
        store = TokenStore.open(path)
        if "part" not in store.meta:
            raise CorpusError(f"{path}: a whole store, not a part (build parts with `litebert data build --shard I/N`)")
        stores.append(store)
    first = _settings(stores[0].meta)
    for store in stores[1:]:
        if _settings(store.meta) != first:
            raise CorpusError(f"{store.path}: not a part of the same build as {stores[0].path} (the input listing, "
                              "the tokenizer or a build setting differs)")
    count = first["part"]["count"]
    by_index: dict[int, TokenStore] = {}
    for store in stores:
        index = store.meta["part"]["index"]
        if index in by_index:
            raise CorpusError(f"{store.path} and {by_index[index].path} are both part {index}/{count}")
        by_index[index] = store
    missing = [i for i in range(count) if i not in by_index]
    if missing:
        raise CorpusError(f"part(s) {', '.join(map(str, missing))} of {count} missing: pass all {count} parts")
    ordered = [by_index[i] for i in range(count)]
    _check_same_texts(ordered)
    expected = 0
    for store in ordered:
        if store.meta["part"]["doc_offset"] != expected:
            raise CorpusError(f"{store.path}: its documents start at ordinal {store.meta['part']['doc_offset']}, the "
                              f"parts before it end at {expected}: the input files changed between the builds")
        expected += store.meta["part"]["documents_read"]
    return ordered


def _check_same_texts(parts: list[TokenStore]) -> None:
    """Every part that read input file i (to tokenize it, or to count its documents) read the same bytes."""
    seen: dict[int, tuple[str, Path]] = {}
    for store in parts:
        for i, digest in enumerate(store.meta["part"].get("file_sha256", [])):
            first = seen.setdefault(i, (digest, store.path))
            if first[0] != digest:
                raise CorpusError(f"{store.path}: input file {i + 1} of the listing has other content than when "
                                  f"{first[1]} read it (the same path and size, another text): the parts were cut "
                                  "from different texts; build them all from identical copies")


def merge_parts(parts, out, overwrite: bool = False) -> TokenStore:
    """Make the parts one store at `out`; the part directories are moved into it (same file system)."""
    parts, out = [Path(p) for p in parts], Path(out)
    if not parts:
        raise CorpusError("no parts given")
    if out.exists() and not overwrite:
        raise CorpusError(f"{out}: already exists (use --overwrite to replace it)")
    stores = _open_parts(parts)
    out.parent.mkdir(parents=True, exist_ok=True)
    for store in stores:
        if os.stat(store.path).st_dev != os.stat(out.parent).st_dev:
            raise CorpusError(f"{store.path}: on another file system than {out}; the merge moves the parts, so put "
                              "them next to the store")
    meta = copy.deepcopy(stores[0].meta)
    del meta["part"]
    meta["build"]["inputs"] = [info for s in stores for info in s.meta["build"]["inputs"]]
    stats = stores[0].stats
    for store in stores[1:]:
        stats = _add_counts(stats, store.stats, str(store.path / "stats.json"))
    for name in SPLITS:
        shards = [{**shard, "name": f"parts/{i:05d}/{shard['name']}"}
                  for i, s in enumerate(stores) for shard in s.meta["splits"][name]["shards"]]
        meta["splits"][name] = {k: sum(s.meta["splits"][name][k] for s in stores)
                                for k in ("documents", "sentences", "tokens")} | {"shards": shards}
    stats["warnings"] = split_warnings(meta["splits"], meta["build"]["validation_fraction"])
    check_usable(stats, meta["build"]["validation_fraction"])

    with writing_store(out) as tmp:  # the same lock as `data build` of `out`: one writer of a store at a time
        moved: list[tuple[Path, Path]] = []
        try:
            (tmp / "parts").mkdir()
            for i, store in enumerate(stores):
                target = tmp / "parts" / f"{i:05d}"
                os.rename(store.path, target)
                moved.append((target, store.path))
            _copy_files(tmp / "parts" / "00000" / "tokenizer", tmp / "tokenizer")
            _write_json(tmp / "stats.json", stats)
            _write_json(tmp / "meta.json", meta)  # last: its presence marks a complete store
            fsync_dir(tmp)
            _swap_into_place(tmp, out)
        except BaseException as exc:
            for target, source in reversed(moved):  # give the parts back (before the temp folder is removed)
                os.rename(target, source)
            err = disk_error(exc) if isinstance(exc, Exception) else None
            if err is None or err.errno not in OUTPUT_ERRNOS:
                raise
            raise CorpusError(f"{out}: cannot write the merged store ({reason(err)}: {err.filename or err}); the "
                              "parts are back where they were") from None
    return TokenStore.open(out)


def _copy_files(src: Path, dst: Path) -> None:
    """Copy a folder (the tokenizer's) file by file: shutil.copytree would fold a full disk's OSError into a
    shutil.Error that no longer carries the errno."""
    dst.mkdir()
    for path in sorted(src.iterdir()):
        if path.is_dir():
            _copy_files(path, dst / path.name)
        else:
            shutil.copyfile(path, dst / path.name)
