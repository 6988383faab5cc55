"""Stock transformers, given a directory litebert saves, tokenizes as litebert does (official-exact), and the
tokenizer call takes transformers' arguments and returns what AutoTokenizer returns on that directory.

References: transformers' AutoTokenizer / pipeline (the installed version), google-research/albert's own outputs
(official_tokenization.jsonl, official_wordpiece_tokenization.jsonl), and the real texts of SST-2, MRPC and
LCQMC. The figures asserted here are the ones the README quotes."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from test_tokenizer import official_truncate_seq_pair

from litebert.errors import ConfigError
from litebert.tokenizer import (
    AlbertTokenizer,
    BatchEncoding,
    WordPieceTokenizer,
    load_tokenizer,
)

transformers = pytest.importorskip("transformers")

SPECIAL_STRINGS = ("[CLS]", "[SEP]", "[MASK]", "<pad>", "<unk>")
BOOK = 20_000  # characters: the official file's book-length texts, each encoded as one input


def _tsv(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


@pytest.fixture(scope="module")
def albert(shared_data) -> AlbertTokenizer:
    return AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")


@pytest.fixture(scope="module")
def wordpiece(shared_data) -> WordPieceTokenizer:
    return WordPieceTokenizer(shared_data / "chinese" / "albert_zh_vocab.txt")


@pytest.fixture(scope="module")
def saved(albert, wordpiece, tmp_path_factory) -> dict[str, Path]:
    """Each tokenizer saved by litebert, as a directory transformers is then given."""
    return {name: tok.save_pretrained(tmp_path_factory.mktemp(name)) for name, tok in
            (("albert", albert), ("wordpiece", wordpiece))}


@pytest.fixture(scope="module")
def albert_dir(saved) -> Path:
    return saved["albert"]


@pytest.fixture(scope="module")
def wordpiece_dir(saved) -> Path:
    return saved["wordpiece"]


@pytest.fixture(scope="module")
def hf_albert(albert_dir):
    return transformers.AutoTokenizer.from_pretrained(albert_dir)


@pytest.fixture(scope="module")
def hf_wordpiece(wordpiece_dir):
    return transformers.AutoTokenizer.from_pretrained(wordpiece_dir)


@pytest.fixture(scope="module")
def sst2(shared_data) -> list[str]:
    rows = _tsv(shared_data / "glue" / "SST-2" / "dev.tsv")
    assert rows[0] == ["sentence", "label"]
    return [r[0] for r in rows[1:]]


@pytest.fixture(scope="module")
def mrpc(shared_data) -> list[tuple[str, str]]:
    rows = _tsv(shared_data / "glue" / "MRPC" / "dev.tsv")
    return [(r[3], r[4]) for r in rows[1:]]


@pytest.fixture(scope="module")
def lcqmc(shared_data) -> list[tuple[str, str]]:
    lines = (shared_data / "chinese" / "lcqmc" / "dev.txt").read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")[:2]) for line in lines]


def _disagreements(ours: dict, theirs, n: int) -> list[int]:
    return [i for i in range(n) if ours["input_ids"][i] != theirs["input_ids"][i]
            or ours["token_type_ids"][i] != theirs["token_type_ids"][i]]


# ---------------------------------------------------------------------------------------------------------------
# Token ids


def test_saved_albert_dir_is_read_through_its_tokenizer_json(albert_dir, hf_albert):
    assert sorted(p.name for p in albert_dir.iterdir()) == ["special_tokens_map.json", "spiece.model",
                                                            "tokenizer.json", "tokenizer_config.json"]
    config = json.loads((albert_dir / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and config["do_lower_case"] is True
    assert hf_albert.model_input_names == ["input_ids", "token_type_ids", "attention_mask"]
    # The case of the issue: " ." is "▁" "." for SentencePiece; transformers' own conversion said ".".
    text = "it 's a charming and often affecting journey . "
    assert hf_albert.tokenize(text)[-2:] == ["▁", "."] == load_tokenizer(albert_dir).tokenize(text)[-2:]


def test_sst2_dev_and_mrpc_dev_ids_agree_with_transformers(albert, hf_albert, sst2, mrpc):
    assert len(sst2) == 872 and len(mrpc) == 408
    ours, theirs = albert.batch_encode(sst2), hf_albert(sst2)
    assert _disagreements(ours, theirs, len(sst2)) == []  # 872 of 872
    a, b = [p[0] for p in mrpc], [p[1] for p in mrpc]
    ours, theirs = albert.batch_encode(a, b), hf_albert(a, b)
    assert _disagreements(ours, theirs, len(a)) == []  # 408 of 408 pairs, token types included


def test_fill_mask_texts_agree_with_transformers(albert, hf_albert):
    """transformers matches "[MASK]" in the raw text and normalizes each stretch around it on its own, as
    litebert's fill-mask does (inference.encode_with_masks), dummy "▁" included."""
    from litebert.families.mlm import encode_with_masks

    texts = ["the capital of france is [MASK].", "[MASK] is a city", "two [MASK][MASK] masks", "  [MASK]  ",
             "Return the number of [MASK] in the list.", "x [MASK] . (y) -- 1,999, café"]
    assert [hf_albert(t)["input_ids"] for t in texts] == [encode_with_masks(albert, t) for t in texts]


def test_official_texts_agree_but_for_special_token_strings(albert, hf_albert, shared_data):
    """The 1,380 sentence-to-chapter-length official texts: transformers gives the official ids on all but the one
    that spells out special tokens ("[CLS] [SEP] [MASK] <pad> <unk> are just text here"): transformers reads a
    special token's text as that token (its fill-mask needs "[MASK]" so), the official tokenizer as plain text."""
    rows = [json.loads(line) for line in
            (shared_data / "albert-vocab" / "official_tokenization.jsonl").read_text(encoding="utf-8").splitlines()]
    short = [r for r in rows if len(r["text"]) < BOOK]
    assert len(short) == 1380
    theirs = hf_albert([r["text"] for r in short])["input_ids"]
    wrong = [r["text"] for r, ids in zip(short, theirs) if ids != r["ids"]]
    assert wrong == [r["text"] for r in short if any(s in r["text"] for s in SPECIAL_STRINGS)]
    assert len(wrong) == 1
    assert hf_albert(wrong[0])["input_ids"][1:6] == [albert.cls_id, albert.sep_id, albert.mask_id, albert.pad_id,
                                                     albert.unk_id]


@pytest.mark.slow
def test_book_length_texts_differ_only_where_sentencepiece_rounds_a_near_tie(albert, hf_albert, shared_data):
    """A whole book as one input: SentencePiece sums piece scores in float32 along the whole text, so where two
    segmentations of a word score within rounding of each other it may pick either; tokenizers scores word by
    word in float64. Checked on the official book-length texts up to 500k characters."""
    rows = [json.loads(line) for line in
            (shared_data / "albert-vocab" / "official_tokenization.jsonl").read_text(encoding="utf-8").splitlines()]
    books = [r for r in rows if BOOK <= len(r["text"]) < 500_000]
    assert len(books) >= 5
    spans = 0
    for row in books:
        ours, theirs = row["ids"], hf_albert(row["text"])["input_ids"]
        i = j = 0
        while i < len(ours) and j < len(theirs):
            if ours[i] == theirs[j]:
                i, j = i + 1, j + 1
                continue
            a, b = i + 1, j + 1  # extend both stretches until they spell the same text again
            text_a, text_b = albert.id_to_token(ours[i]), albert.id_to_token(theirs[j])
            while text_a != text_b:
                if len(text_a) < len(text_b):
                    text_a, a = text_a + albert.id_to_token(ours[a]), a + 1
                else:
                    text_b, b = text_b + albert.id_to_token(theirs[b]), b + 1
            gap = sum(map(albert.sp.get_score, ours[i:a])) - sum(map(albert.sp.get_score, theirs[j:b]))
            assert abs(gap) < 0.01, (row["text"][:40], text_a, albert.convert_ids_to_tokens(theirs[j:b]))
            spans += 1
            i, j = a, b
        assert (i, j) == (len(ours), len(theirs))
    print(f"\nbook-length texts: {spans} near-tie stretches differ in {sum(len(r['ids']) for r in books)} tokens")


def test_wordpiece_dir_agrees_with_transformers(wordpiece, wordpiece_dir, hf_wordpiece, shared_data, lcqmc):
    """Chinese ALBERT directories load as transformers' BertTokenizer, which agrees on the official WordPiece
    outputs and on LCQMC dev pairs. (A documented difference not in these texts: a Greek capital sigma ending a
    word, which Python's lower() makes "ς" and transformers "σ".)"""
    assert (wordpiece_dir / "tokenizer.json").exists() is False
    assert type(hf_wordpiece).__name__.startswith("BertTokenizer")
    rows = [json.loads(line) for line in (shared_data / "chinese" / "official_wordpiece_tokenization.jsonl")
            .read_text(encoding="utf-8").splitlines()]
    texts = [r["text"] for r in rows]
    assert hf_wordpiece(texts)["input_ids"] == [r["ids"] for r in rows] == wordpiece.batch_encode(texts)["input_ids"]
    a, b = [p[0] for p in lcqmc[:2000]], [p[1] for p in lcqmc[:2000]]
    assert _disagreements(wordpiece.batch_encode(a, b), hf_wordpiece(a, b), len(a)) == []


# ---------------------------------------------------------------------------------------------------------------
# Predictions


def _litebert_logits(model, tok, texts: list[str]) -> np.ndarray:
    """[N, labels] logits of litebert's model on litebert's tokenizer call."""
    with torch.no_grad():
        return torch.cat([model(**tok(texts[start:start + 64], padding=True, return_tensors="pt")).logits
                          for start in range(0, len(texts), 64)]).numpy()


@pytest.mark.slow
def test_sst2_dev_predictions_agree_with_the_transformers_pipeline(albert, sst2, tmp_path):
    """A random-weight classifier saved by litebert, scored by litebert (its tokenizer call and model) and by
    `transformers.pipeline("text-classification", model=DIR)`: the same label on all 872 SST-2 dev texts."""
    from tiny_models import TINY

    import litebert
    from litebert.config import AlbertConfig

    torch.manual_seed(0)
    # Wide random weights, so the pooled output (and the label) depends on the tokens; the classifier's bias is
    # then set so that half the texts get each label, every one at least 1e-4 from the boundary.
    config = AlbertConfig(vocab_size=albert.vocab_size, **{**TINY, "max_position_embeddings": 128},
                          initializer_range=0.5)
    model = litebert.AlbertForSequenceClassification(config).eval()
    logits = _litebert_logits(model, albert, sst2)  # [872, 2]
    shift = float(np.median(logits[:, 1] - logits[:, 0]))
    with torch.no_grad():
        model.classifier.bias[1] -= shift
    logits[:, 1] -= shift
    assert np.abs(logits[:, 1] - logits[:, 0]).min() > 1e-4
    model.save_pretrained(tmp_path / "clf", tokenizer=albert)
    reloaded = litebert.AlbertForSequenceClassification.from_pretrained(tmp_path / "clf").eval()
    np.testing.assert_allclose(_litebert_logits(reloaded, albert, sst2[:64]), logits[:64], atol=1e-5)
    ours = torch.softmax(torch.from_numpy(logits), -1).numpy()

    clf = transformers.pipeline("text-classification", model=str(tmp_path / "clf"), device="cpu")
    label2id = {name: int(i) for i, name in clf.model.config.id2label.items()}
    theirs = np.zeros_like(ours)
    for row, scores in enumerate(clf(sst2, top_k=None, batch_size=64)):
        for s in scores:
            theirs[row, label2id[s["label"]]] = s["score"]
    assert int((ours.argmax(-1) == theirs.argmax(-1)).sum()) == 872
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
    assert 400 < ours.argmax(-1).sum() < 472  # both labels occur: agreeing on them means something


# ---------------------------------------------------------------------------------------------------------------
# The tokenizer call, against AutoTokenizer on the same directory


PADDINGS = [False, True, "longest", "max_length", "do_not_pad"]
TRUNCATIONS = [None, False, True, "longest_first", "only_first", "only_second"]
MAX_LENGTHS = [None, 9, 16]
TENSORS = [None, "np", "pt"]


def _lengths_official(na: int, nb: int, budget: int) -> tuple[int, int]:
    a, b = list(range(na)), list(range(nb))
    official_truncate_seq_pair(a, b, budget)
    return len(a), len(b)


def _lengths_transformers_fast(na: int, nb: int, budget: int) -> tuple[int, int]:
    """The tokenizers library's longest_first (its TruncationStrategy::LongestFirst), as documented there."""
    short, long_, swapped = (nb, na, True) if na > nb else (na, nb, False)
    long_ = short if short > budget else max(short, budget - short)
    if short + long_ > budget:
        short, long_ = budget // 2, budget // 2 + budget % 2
    return (long_, short) if swapped else (short, long_)


def _plain(value):
    if isinstance(value, torch.Tensor):
        return ("pt", value.dtype, value.tolist())
    if isinstance(value, np.ndarray):
        return ("np", value.dtype, value.tolist())
    return ("list", None, value)


def _call(tok, args, kwargs, refusals):
    try:
        out = tok(*args, **kwargs)
    except refusals as exc:
        return type(exc)
    return {key: _plain(out[key]) for key in ("input_ids", "token_type_ids", "attention_mask")}


@pytest.mark.parametrize("kind", ["albert", "wordpiece"])
def test_the_call_returns_what_autotokenizer_returns(kind, albert, hf_albert, wordpiece, hf_wordpiece, sst2, mrpc,
                                                     lcqmc):
    tok, hf = (albert, hf_albert) if kind == "albert" else (wordpiece, hf_wordpiece)
    pairs = mrpc[:3] if kind == "albert" else lcqmc[:3]
    singles = sst2[:3] if kind == "albert" else [p[0] for p in lcqmc[3:6]]
    inputs = {"one text": (singles[0],), "texts": (singles,), "one pair": pairs[0],
              "pairs": ([p[0] for p in pairs], [p[1] for p in pairs])}
    compared = differ = both_refused = 0
    for (name, args), padding, truncation, max_length, tensors in itertools.product(
            inputs.items(), PADDINGS, TRUNCATIONS, MAX_LENGTHS, TENSORS):
        kwargs = {"padding": padding, "truncation": truncation, "max_length": max_length, "return_tensors": tensors}
        # transformers refuses with ValueError, or tokenizers' own plain Exception ("Truncation error: ...")
        ours, theirs = _call(tok, args, kwargs, ConfigError), _call(hf, args, kwargs, Exception)
        if isinstance(ours, type) or isinstance(theirs, type):
            # A request one side refuses the other refuses too (only_second on one text that must be cut, an
            # impossible only_first / only_second cut, "pt" from rows of different lengths). One exception: "np"
            # from rows of different lengths, where transformers returns arrays of dtype object (of arrays).
            ragged = not isinstance(theirs, type) and theirs["input_ids"][:2] == ("np", np.dtype(object))
            assert isinstance(ours, type) and (isinstance(theirs, type) or ragged), (name, kwargs, ours, theirs)
            both_refused += 1
            continue
        compared += 1
        if ours == theirs:
            continue
        # The one known difference: longest_first cutting both segments of a pair to an odd total.
        differ += 1
        row_pairs = [args] if name == "one pair" else list(zip(*args))
        for a, b in row_pairs:
            na, nb = len(tok.encode_ids(a)), len(tok.encode_ids(b))
            budget = max_length - 3
            if _lengths_official(na, nb, budget) != _lengths_transformers_fast(na, nb, budget):
                break
        else:
            pytest.fail(f"{name} {kwargs}: ours {ours} != transformers {theirs}")
        assert truncation in (None, True, "longest_first") and name in ("one pair", "pairs"), (name, kwargs)
    assert compared > 500 and both_refused > 50
    print(f"\n{kind}: {compared} calls compared, {differ} differ (odd longest_first cuts), {both_refused} refused")


def test_the_call_shapes_and_types(albert):
    one = albert("Hello, my dog is cute")
    assert isinstance(one, BatchEncoding) and list(one) == ["input_ids", "token_type_ids", "attention_mask"]
    assert one.input_ids == [2, 10975, 15, 51, 1952, 25, 10901, 3] == albert.encode("Hello, my dog is cute").input_ids
    pt = albert(["a b c", "d"], ["e", "f g"], padding="max_length", max_length=12, return_tensors="pt")
    assert pt.input_ids.shape == (2, 12) and pt.input_ids.dtype == torch.long
    for row, (a, b) in enumerate([("a b c", "e"), ("d", "f g")]):
        enc = albert.encode(a, b, max_length=12, padding="max_length")
        assert [pt[key][row].tolist() for key in pt] == [enc.input_ids, enc.token_type_ids, enc.attention_mask]
    assert pt.to("cpu").attention_mask.sum(-1).tolist() == [len(albert.encode(a, b).input_ids)
                                                            for a, b in [("a b c", "e"), ("d", "f g")]]
    assert albert("x " * 600, truncation=True).input_ids.__len__() == 512  # model_max_length
    with pytest.raises(ConfigError, match=r"text_pair"):
        albert("a", ["b"])
    with pytest.raises(ConfigError, match=r"text\[1\]: a list"):
        albert(["a", ["pre", "split"]])
