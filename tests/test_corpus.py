"""Corpus reading: formats, compression, sentence splitting, bad input."""

import bz2
import gzip
import json
import lzma
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litebert.data.corpus import CorpusReader, expand_inputs, read_documents, split_sentences
from litebert.errors import CorpusError, DataFormatError

PLAIN = "First sentence of doc one.\nSecond sentence.\n\n\nDoc two only line.\n  \nDoc three a.\nDoc three b.\n"
PLAIN_DOCS = [["First sentence of doc one.", "Second sentence."], ["Doc two only line."],
              ["Doc three a.", "Doc three b."]]


# -- sentence splitting -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("Mr. Smith went to Washington. He arrived on Monday.", ["Mr. Smith went to Washington.", "He arrived on Monday."]),
    ('He said "Stop!" Then he left.', ['He said "Stop!"', "Then he left."]),
    ('"Stop!" he said. She nodded.', ['"Stop!" he said.', "She nodded."]),
    ("Pi is 3.14. The U.S. Army won. J. R. R. Tolkien wrote it.",
     ["Pi is 3.14.", "The U.S. Army won.", "J. R. R. Tolkien wrote it."]),
    ("Is it? Yes! (It is.) Really.", ["Is it?", "Yes!", "(It is.)", "Really."]),
    ("Dr. No, e.g. the film, was fine. See Fig. 3 now.", ["Dr. No, e.g. the film, was fine.", "See Fig. 3 now."]),
    ("no terminator at all", ["no terminator at all"]),
    ("Line one\nline two. Three.", ["Line one", "line two.", "Three."]),
])
def test_split_english(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("今天天气很好。我们去公园吧！好的", ["今天天气很好。", "我们去公园吧！", "好的"]),
    ("他说：“你好。”然后走了……真的吗？是的", ["他说：“你好。”", "然后走了……", "真的吗？", "是的"]),
    ("第一；第二。", ["第一；", "第二。"]),
    ("版本2.0发布了!大家好", ["版本2.0发布了!", "大家好"]),
])
def test_split_chinese(text, expected):
    assert split_sentences(text) == expected


_TEXT = st.text(alphabet=st.sampled_from(list("abc XYZ.!?。！？…\"”'\n3")), max_size=80)


@given(_TEXT)
@settings(max_examples=300, deadline=None)
def test_split_keeps_every_character(text):
    sentences = split_sentences(text)
    assert all(s and s == s.strip() for s in sentences)
    assert re.sub(r"\s", "", "".join(sentences)) == re.sub(r"\s", "", text)  # nothing lost, nothing added


# -- reading ------------------------------------------------------------------------------------------------------


def test_plain_text_documents(tmp_path):
    (tmp_path / "a.txt").write_text("\ufeff" + PLAIN, encoding="utf-8")
    (tmp_path / "b.txt").write_text("File end ends a doc.", encoding="utf-8")  # no trailing newline
    reader = CorpusReader([tmp_path / "a.txt", tmp_path / "b.txt"])
    docs = list(reader.documents())
    assert docs == PLAIN_DOCS + [["File end ends a doc."]]
    assert reader.stats.documents == 4 and reader.stats.files == 2
    assert reader.stats.lines == PLAIN.count("\n") + 1


@pytest.mark.parametrize("suffix, opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_compressed_files_read_transparently(tmp_path, suffix, opener):
    path = tmp_path / f"corpus.txt{suffix}"
    with opener(path, "wt", encoding="utf-8") as f:
        f.write(PLAIN)
    assert read_documents(path) == PLAIN_DOCS
    jsonl = tmp_path / f"docs.jsonl{suffix}"
    with opener(jsonl, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"text": "One. Two."}) + "\n")
    assert read_documents(jsonl) == [["One.", "Two."]]


def test_small_chunks_keep_documents_whole(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text(PLAIN * 50, encoding="utf-8")
    big = list(CorpusReader(path).documents())
    reader = CorpusReader(path, chunk_bytes=16)
    chunks = list(reader.chunks())
    assert len(chunks) > 10
    assert list(CorpusReader(path, chunk_bytes=16).documents()) == big
    ids = [d for c in chunks for d in c.doc_ids]
    assert ids == sorted(ids) and ids[-1] == reader.stats.documents - 1


def test_jsonl_documents_split_into_sentences(tmp_path):
    path = tmp_path / "docs.jsonl"
    records = [{"text": "Hello there. How are you?", "id": 1}, {"text": "   "}, {"text": "今天很好。明天下雨！"}, {}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records[:3]) + "\n\n", encoding="utf-8")
    reader = CorpusReader(path)
    assert list(reader.documents()) == [["Hello there.", "How are you?"], ["今天很好。", "明天下雨！"]]
    assert reader.stats.empty_records == 1 and reader.stats.documents == 2


@pytest.mark.parametrize("line, message", [
    ("{not json", r"bad\.jsonl:2: not valid JSON"),
    ('{"content": "x"}', r"bad\.jsonl:2: expected a JSON object with a string field 'text'"),
    ('["text"]', r"bad\.jsonl:2: expected a JSON object"),
])
def test_jsonl_errors_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"text": "fine."}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=message):
        read_documents(path)


def test_bad_utf8_policies(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"Good line.\nBad \xff\xfe line.\nAfter.\n\nDoc two.\n")
    with pytest.raises(CorpusError, match=r"bad\.txt:2: invalid UTF-8 .*--on-bad-utf8 replace\|skip"):
        read_documents(path)
    reader = CorpusReader(path, on_bad_utf8="replace")
    assert list(reader.documents()) == [["Good line.", "Bad \ufffd\ufffd line.", "After."], ["Doc two."]]
    assert reader.stats.bad_utf8_lines == 1
    reader = CorpusReader(path, on_bad_utf8="skip")
    assert list(reader.documents()) == [["Good line.", "After."], ["Doc two."]]  # a skipped line is not a break
    assert reader.stats.bad_utf8_lines == 1 and reader.stats.lines == 5


def test_bad_utf8_line_number_in_later_block(tmp_path):
    path = tmp_path / "late.txt.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"ok line.\n" * 5000 + b"\xc3\x28 broken\n")
    reader = CorpusReader(path, chunk_bytes=1000)
    with pytest.raises(CorpusError, match=r"late\.txt\.gz:5001: invalid UTF-8"):
        list(reader.chunks())


def test_inputs_files_folders_globs(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("b.txt", "a.txt", "sub/c.txt.gz", ".hidden"):
        (tmp_path / name).write_text("x.\n")
    assert [p.name for p in expand_inputs(tmp_path)] == ["a.txt", "b.txt", "c.txt.gz"]
    assert [p.name for p in expand_inputs(str(tmp_path / "*.txt"))] == ["a.txt", "b.txt"]
    with pytest.raises(CorpusError, match=r"missing\.txt: no such file or folder"):
        expand_inputs([tmp_path / "a.txt", tmp_path / "missing.txt"])
    with pytest.raises(CorpusError, match="pattern matches no files"):
        expand_inputs(str(tmp_path / "*.none"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(CorpusError, match="folder holds no files"):
        expand_inputs(tmp_path / "empty")


def test_bad_policy_name(tmp_path):
    with pytest.raises(CorpusError, match="on_bad_utf8='ignore'"):
        CorpusReader(tmp_path, on_bad_utf8="ignore")
