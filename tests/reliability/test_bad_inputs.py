"""Promise 5: bad input never crashes obscurely or hangs.

Hypothesis feeds each reader broken files: random bytes, near-valid files with parts deleted or swapped for
values of the wrong type (mutations of a valid file), bad encodings, truncation, giant lines, empty documents. For
every case the reader either returns a result or raises a LitebertError whose message names the file (and the
line or field where it knows one); any other exception fails the test, and every case must finish within a few
seconds (SIGALRM). The number of cases run per reader is printed at the end of the session.

Readers: the corpus reader (plain text, JSONL, .gz/.bz2/.xz), GLUE TSV, SQuAD and CMRC2018 JSON, RACE JSON, CoNLL,
AlbertConfig.from_json (all three dialects), safetensors weights (load_tensors, from_pretrained) and TF checkpoints
(the tensor-bundle reader and the TF -> HF conversion).
"""

from __future__ import annotations

import bz2
import copy
import gzip
import json
import lzma
import os
import struct

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness import time_limit
from litebert.config import AlbertConfig
from litebert.convert.hf_map import ours_to_hf
from litebert.convert.tf_bundle import CheckpointReader
from litebert.convert.tf_map import load_tf_albert
from litebert.data.corpus import CorpusReader, read_documents
from litebert.data.ner import read_conll
from litebert.data.race import read_race
from litebert.data.squad import read_cmrc2018, read_squad
from litebert.data.tasks import get_task, read_examples
from litebert.errors import LitebertError
from litebert.model import AlbertForPreTraining
from litebert.pretrained import load_tensors, save_pretrained
from tf_fixtures import TableWriter, encode_entry, encode_header, hf_to_tf_tensors, write_checkpoint

# Cases per reader; LITEBERT_FUZZ_EXAMPLES=5000 for a deep run (CI uses the default).
FUZZ = settings(max_examples=int(os.environ.get("LITEBERT_FUZZ_EXAMPLES", "150")), deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CASE_SECONDS = 20  # far above what any case needs; a case over it has hung


def reads_or_fails_cleanly(read, path, *names: str):
    """read() returns, or raises a LitebertError naming `path` (or one of `names`, e.g. a field)."""
    with time_limit(CASE_SECONDS):
        try:
            return read()
        except LitebertError as e:
            message = str(e)
            assert path.name in message or any(n in message for n in names), f"{type(e).__name__}: {message}"
            return None


# --------------------------------------------------------------------------------------------- JSON mutations

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)


def paths_of(obj, prefix=()):
    """Every (container path, key) inside a JSON value."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        yield prefix, key
        yield from paths_of(value, prefix + (key,))


def mutate(data, obj):
    """A copy of `obj` with 1-3 random edits: delete a key or item, or put a random JSON value in its place."""
    obj = copy.deepcopy(obj)
    for _ in range(data.draw(st.integers(1, 3))):
        spots = list(paths_of(obj))
        if not spots:
            break
        prefix, key = data.draw(st.sampled_from(spots))
        parent = obj
        for k in prefix:
            parent = parent[k]
        if data.draw(st.booleans()):
            del parent[key]
        else:
            parent[key] = data.draw(JSON_VALUES)
    return obj


def json_bytes(data, base) -> bytes:
    """A mutated copy of `base`, deeply nested junk, or random bytes."""
    kind = data.draw(st.sampled_from(["mutated", "mutated", "mutated", "deep", "bytes", "whole"]))
    if kind == "mutated":
        return json.dumps(mutate(data, base)).encode()
    if kind == "deep":  # json.loads gives up on these with RecursionError
        return b"[" * data.draw(st.integers(1000, 200_000))
    if kind == "whole":
        return json.dumps(data.draw(JSON_VALUES)).encode()
    return data.draw(st.binary(max_size=300))


# --------------------------------------------------------------------------------------------- corpus


ODD_LINES = ["\ufeffBOM first.", "tab\tand\rCR", "nul\x00byte", "zero\u200bwidth", "  ", "\u2028", "中文句子。"]
TEXT_LINES = st.lists(st.one_of(st.just(""), st.text(max_size=40), st.sampled_from(ODD_LINES)), max_size=30)


def corpus_bytes(data, jsonl: bool) -> bytes:
    kind = data.draw(st.sampled_from(["lines", "lines", "bytes", "mixed"]))
    if kind == "bytes":
        return data.draw(st.binary(max_size=500))
    lines = data.draw(TEXT_LINES)
    if jsonl:
        records = [json.dumps({"text": line}) if data.draw(st.booleans()) else line for line in lines]
        if data.draw(st.booleans()):
            records.append("[" * data.draw(st.integers(100, 100_000)))
        lines = records
    raw = "\n".join(lines).encode("utf-8", "surrogatepass")
    if kind == "mixed":  # invalid UTF-8 and latin-1 bytes spliced in
        cut = data.draw(st.integers(0, len(raw)))
        raw = raw[:cut] + data.draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xe9t\xe9", b"\xed\xa0\x80"])) + raw[cut:]
    return raw


def compress(data, suffix: str, raw: bytes) -> bytes:
    packed = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix](raw)
    damage = data.draw(st.sampled_from(["none", "truncate", "flip", "garbage"]))
    if damage == "truncate":
        return packed[: data.draw(st.integers(0, max(0, len(packed) - 1)))]
    if damage == "flip" and len(packed) > 12:
        i = data.draw(st.integers(10, len(packed) - 1))
        return packed[:i] + bytes([packed[i] ^ 0xFF]) + packed[i + 1:]
    if damage == "garbage":
        return data.draw(st.binary(max_size=200))
    return packed


@FUZZ
@given(data=st.data())
def test_corpus_reader(fuzz_count, fuzz_dir, data):
    fuzz_count("corpus reader")
    fmt = data.draw(st.sampled_from([".txt", ".jsonl"]))
    comp = data.draw(st.sampled_from(["", "", ".gz", ".bz2", ".xz"]))
    raw = corpus_bytes(data, fmt == ".jsonl")
    path = fuzz_dir / f"corpus{fmt}{comp}"
    path.write_bytes(compress(data, comp, raw) if comp else raw)
    policy = data.draw(st.sampled_from(["error", "replace", "skip"]))
    docs = reads_or_fails_cleanly(lambda: read_documents([path], on_bad_utf8=policy), path)
    if docs is not None:
        assert all(doc and all(isinstance(s, str) and s for s in doc) for doc in docs)


def test_corpus_reader_giant_line_and_empty_documents(tmp_path):
    path = tmp_path / "giant.txt"
    path.write_bytes(b"\n\n\n" + b"word " * 1_000_000 + b"\n\n\n\nshort one.\n\n")  # a 5 MB line
    reader = CorpusReader([path], chunk_bytes=1 << 16)
    with time_limit(CASE_SECONDS):
        docs = list(reader.documents())
    assert [len(d) for d in docs] == [1, 1] and len(docs[0][0]) == 5_000_000 - 1
    assert reader.stats.documents == 2 and reader.stats.lines == 9


def test_token_store_cuts_a_giant_line_and_skips_empty_documents(tiny_data, tmp_path):
    from litebert.data.store_build import build_store

    _, tokenizer, _ = tiny_data
    path = tmp_path / "corpus.txt"
    path.write_text("\n\n" + "return the value " * 20_000 + "\n\nA short document.\nWith two lines.\n\n\n")
    with time_limit(60):
        store = build_store([path], tokenizer, tmp_path / "store", validation_fraction=0.0, max_sentence_tokens=64)
    assert store.stats["kept"]["documents"] == 2
    assert int(store.split("train").sentence_lengths.max()) <= 64


# --------------------------------------------------------------------------------------------- task files


@FUZZ
@given(data=st.data())
def test_glue_tsv(fuzz_count, fuzz_dir, data):
    fuzz_count("GLUE TSV")
    task = get_task(data.draw(st.sampled_from(["mrpc", "sts-b", "cola", "qqp", "rte", "sst-2"])))
    split = data.draw(st.sampled_from(["train", "dev", "test"]))
    header = ["index", task.text_a, *([task.text_b] if task.text_b else []), task.label]
    cell = st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=12) | st.sampled_from(
        ["0", "1", "2.5", "nan", "inf", "-1", "entailment", ""])
    rows = data.draw(st.lists(st.lists(cell, max_size=len(header) + 2), max_size=8))
    lines = ([] if split in task.headerless or data.draw(st.booleans()) else ["\t".join(header)])
    lines += ["\t".join(r) for r in rows]
    raw = "\n".join(lines).encode("utf-8", "surrogatepass")
    if data.draw(st.booleans()):
        raw = data.draw(st.sampled_from([b"", b"\xff\xfe\x00", raw + b"\xff\n", raw[: len(raw) // 2]]))
    path = fuzz_dir / f"{split}.tsv"
    path.write_bytes(raw)
    reads_or_fails_cleanly(lambda: read_examples(task, path, split), path)


SQUAD = {"version": "1.1", "data": [{"title": "T", "paragraphs": [{"context": "The cat sat on the mat.", "qas": [
    {"id": "q1", "question": "Where did it sit?", "answers": [{"text": "the mat", "answer_start": 15}]},
    {"id": "q2", "question": "Who?", "is_impossible": True, "answers": []}]}]}]}
CMRC = [{"context_id": "c1", "context_text": "今天天气很好。", "title": "t",
         "qas": [{"query_id": "q1", "query_text": "天气?", "answers": ["很好", "好"]}]}]


@FUZZ
@given(data=st.data())
def test_squad_json(fuzz_count, fuzz_dir, data):
    fuzz_count("SQuAD JSON")
    path = fuzz_dir / "squad.json"
    path.write_bytes(json_bytes(data, SQUAD))
    reads_or_fails_cleanly(lambda: read_squad(path), path)


@FUZZ
@given(data=st.data())
def test_cmrc2018_json(fuzz_count, fuzz_dir, data):
    fuzz_count("CMRC2018 JSON")
    path = fuzz_dir / "cmrc.json"
    path.write_bytes(json_bytes(data, CMRC))
    reads_or_fails_cleanly(lambda: read_cmrc2018(path), path)


RACE = {"id": "high1.txt", "article": "Tom has a red ball. He plays with it every day.",
        "questions": ["Tom has a _ ball.", "When does he play?"],
        "options": [["red", "blue", "green", "big"], ["never", "every day", "at night", "on Sunday"]],
        "answers": ["A", "B"]}


@FUZZ
@given(data=st.data())
def test_race_json(fuzz_count, fuzz_dir, data):
    fuzz_count("RACE JSON")
    path = fuzz_dir / "1.txt"
    path.write_bytes(json_bytes(data, RACE))
    examples = reads_or_fails_cleanly(lambda: read_race(path), path)
    for ex in examples or ():
        assert isinstance(ex.article, str) and isinstance(ex.question, str)
        assert len(ex.options) == 4 and all(isinstance(o, str) for o in ex.options) and ex.label in range(4)


CONLL_LINE = st.one_of(
    st.just(""), st.just("-DOCSTART- -X- -X- O"),
    st.builds(lambda w, t: f"{w} NNP B-NP {t}", st.text(alphabet="abcXY.,", min_size=1, max_size=6),
              st.sampled_from(["O", "B-PER", "I-ORG", "B-MISC", "X-BAD", "o"])),
    st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=20))


@FUZZ
@given(data=st.data())
def test_conll(fuzz_count, fuzz_dir, data):
    fuzz_count("CoNLL")
    raw = "\n".join(data.draw(st.lists(CONLL_LINE, max_size=20))).encode("utf-8", "surrogatepass")
    if data.draw(st.booleans()):
        raw += data.draw(st.sampled_from([b"\xff O\n", b"\r\r\n", b"\x00 O", b"a\x85b O\n"]))
    path = fuzz_dir / "eng.train"
    path.write_bytes(raw)
    labels = data.draw(st.sampled_from([None, get_task("conll2003").labels]))
    reads_or_fails_cleanly(lambda: read_conll(path, labels=labels), path)


# --------------------------------------------------------------------------------------------- configs

TINY = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=16)
CONFIGS = [{"format": "litebert", **TINY.to_dict()}, TINY.to_hf_dict("AlbertForPreTraining"),
           TINY.to_official_dict()]


@FUZZ
@given(data=st.data())
def test_config_json(fuzz_count, fuzz_dir, data):
    fuzz_count("config JSON")
    path = fuzz_dir / "config.json"
    path.write_bytes(json_bytes(data, data.draw(st.sampled_from(CONFIGS))))
    config = reads_or_fails_cleanly(lambda: AlbertConfig.from_json(path), path)
    if config is not None:
        config.validate()  # what was accepted is a valid config


# --------------------------------------------------------------------------------------------- weights


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    return AlbertForPreTraining(TINY)


def damage(data, raw: bytes) -> bytes:
    kind = data.draw(st.sampled_from(["truncate", "flip", "header", "garbage"]))
    if kind == "truncate":
        return raw[: data.draw(st.integers(0, len(raw) - 1))]
    if kind == "flip":
        i = data.draw(st.integers(0, len(raw) - 1))
        return raw[:i] + bytes([raw[i] ^ data.draw(st.integers(1, 255))]) + raw[i + 1:]
    if kind == "header":  # safetensors: an 8-byte header length, then JSON
        return struct.pack("<Q", data.draw(st.integers(0, 2**64 - 1))) + raw[8:]
    return data.draw(st.binary(max_size=400))


DTYPES = [torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool,
          torch.complex64]


@FUZZ
@given(data=st.data())
def test_safetensors_weights(fuzz_count, fuzz_dir, tiny_model, data):
    """Damaged bytes (load_tensors), or a well-formed file whose tensors are missing, extra, reshaped or of
    another dtype (from_pretrained)."""
    from safetensors.torch import save_file

    fuzz_count("safetensors")
    folder = fuzz_dir / "model"
    fmt = data.draw(st.sampled_from(["hf", "litebert"]))
    save_pretrained(tiny_model, folder, format=fmt)
    weights = folder / "model.safetensors"
    if data.draw(st.booleans()):
        weights.write_bytes(damage(data, weights.read_bytes()))
        reads_or_fails_cleanly(lambda: load_tensors(weights), weights)
    else:
        tensors = load_tensors(weights)
        for _ in range(data.draw(st.integers(1, 3))):
            name = data.draw(st.sampled_from(sorted(tensors)))
            edit = data.draw(st.sampled_from(["drop", "extra", "shape", "dtype"]))
            if edit == "drop":
                del tensors[name]
            elif edit == "extra":
                tensors[name + ".extra"] = torch.zeros(2)
            elif edit == "shape":
                tensors[name] = torch.zeros(tensors[name].numel() + 1)
            else:
                tensors[name] = tensors[name].to(data.draw(st.sampled_from(DTYPES)))
            if not tensors:
                break
        save_file(tensors, str(weights))
    model = reads_or_fails_cleanly(lambda: AlbertForPreTraining.from_pretrained(folder), weights, "config.json")
    if model is not None:  # whatever loads, loads as floating-point parameters
        assert all(p.is_floating_point() for p in model.parameters())


@pytest.fixture(scope="module")
def tiny_tf_tensors(tiny_model):
    official = TINY.to_official_dict()
    tensors = hf_to_tf_tensors(ours_to_hf(tiny_model.state_dict(), TINY), official)
    return tensors, official


def tf_folder(fuzz_dir, official) -> tuple:
    folder = fuzz_dir / "tf"
    folder.mkdir(exist_ok=True)
    (folder / "albert_config.json").write_text(json.dumps(official))
    return folder, folder / "model.ckpt"


@FUZZ
@given(data=st.data())
def test_tf_checkpoint_bytes(fuzz_count, fuzz_dir, tiny_tf_tensors, data):
    """The tensor-bundle reader on damaged .index / .data bytes, with and without CRC checks."""
    fuzz_count("TF checkpoint bytes")
    tensors, official = tiny_tf_tensors
    folder, prefix = tf_folder(fuzz_dir, official)
    write_checkpoint(prefix, tensors, block_size=data.draw(st.sampled_from([64, 262144])))
    target = data.draw(st.sampled_from([folder / "model.ckpt.index", folder / "model.ckpt.data-00000-of-00001"]))
    target.write_bytes(damage(data, target.read_bytes()))
    verify = data.draw(st.booleans())
    reads_or_fails_cleanly(lambda: CheckpointReader(prefix, verify=verify).read_all(), target, "model.ckpt")


@FUZZ
@given(entry=st.fixed_dictionaries({
    "dtype": st.sampled_from([1, 2, 3, 7, 14, 19, 20, 21, 99, 0]),
    "shape": st.lists(st.integers(-3, 2**40), max_size=3),
    "shard": st.integers(0, 3), "offset": st.integers(-(2**63), 2**63 - 1) | st.integers(0, 64),
    "size": st.integers(-(2**63), 2**63 - 1) | st.integers(0, 64)}), verify=st.booleans())
# found by CI: an empty tensor whose other dimensions multiply past numpy's index range
@example(entry={"dtype": 1, "shape": [0, 4197765, 549_302_547_717], "shard": 0, "offset": 0, "size": 0}, verify=False)
def test_tf_checkpoint_entries(fuzz_count, fuzz_dir, entry, verify):
    """Index entries with any dtype, shape, shard, offset and size (negative, huge), over a 64-byte data file."""
    fuzz_count("TF checkpoint entries")
    folder = fuzz_dir / "tf-entries"
    folder.mkdir(exist_ok=True)
    prefix = folder / "model.ckpt"
    (folder / "model.ckpt.data-00000-of-00001").write_bytes(bytes(range(64)))
    table = TableWriter(262144, 16)
    table.add(b"", encode_header(1))
    table.add(b"bert/x", encode_entry(entry["dtype"], tuple(entry["shape"]), entry["shard"], entry["offset"],
                                      entry["size"], 0))
    index = folder / "model.ckpt.index"
    index.write_bytes(table.finish())
    reads_or_fails_cleanly(lambda: CheckpointReader(prefix, verify=verify).read_all(), index, "model.ckpt")


@FUZZ
@given(data=st.data())
def test_tf_conversion(fuzz_count, fuzz_dir, tiny_tf_tensors, data):
    """A well-formed checkpoint whose tensors are missing, extra, of another size, flattened or of another dtype,
    converted to HF names. (Integer tensors and a 1-D embedding table also have a test of their own below.)"""
    fuzz_count("TF conversion")
    tensors, official = tiny_tf_tensors
    tensors = dict(tensors)
    folder, prefix = tf_folder(fuzz_dir, official)
    for _ in range(data.draw(st.integers(1, 3))):
        name = data.draw(st.sampled_from(sorted(tensors)))
        edit = data.draw(st.sampled_from(["drop", "shape", "flatten", "dtype", "extra"]))
        if edit == "drop" and len(tensors) > 1:
            del tensors[name]
        elif edit == "shape":
            shape = tensors[name].shape
            step = data.draw(st.sampled_from([-1, 1])) if shape and shape[0] > 1 else 1  # never below 1 row
            tensors[name] = np.zeros(((shape[0] if shape else 1) + step, *shape[1:]), np.float32)
        elif edit == "extra":
            tensors[data.draw(st.sampled_from(["bert/unknown/kernel", "cls/x/bias", "global_step"]))] = np.zeros(3)
        elif edit == "flatten":
            tensors[name] = tensors[name].reshape(-1)
        else:
            tensors[name] = tensors[name].astype(data.draw(st.sampled_from(
                [np.float16, np.float64, np.int32, np.int64, np.bool_, np.uint8, np.complex64])))
    write_checkpoint(prefix, tensors)
    # the file, or the field: a TF variable name (bert/..., cls/...)
    result = reads_or_fails_cleanly(lambda: load_tf_albert(prefix), prefix, "model.ckpt", "albert_config", "bert/",
                                    "cls/")
    if result is not None:
        assert all(t.is_floating_point() for t in result[1].values())


def test_tf_conversion_of_a_1d_embedding_table_is_a_conversion_error(fuzz_dir, tiny_tf_tensors):
    tensors, official = tiny_tf_tensors
    folder, prefix = tf_folder(fuzz_dir, official)
    write_checkpoint(prefix, {**tensors, "bert/embeddings/word_embeddings": np.zeros(10, np.float32)})
    with pytest.raises(LitebertError, match="word_embeddings"):
        load_tf_albert(prefix)


def test_tf_conversion_of_integer_weights_is_a_conversion_error(fuzz_dir, tiny_tf_tensors):
    tensors, official = tiny_tf_tensors
    folder, prefix = tf_folder(fuzz_dir, official)
    name = "bert/embeddings/LayerNorm/beta"
    write_checkpoint(prefix, {**tensors, name: tensors[name].astype(np.int32)})
    with pytest.raises(LitebertError, match="LayerNorm"):
        load_tf_albert(prefix)


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")
