"""CoNLL-2003 reading (counts from shared/data/README.md), word -> sub-token features and back."""

import pytest

from litebert.data.ner import align_predictions, encode_token_examples, read_conll
from litebert.data.tasks import get_task, read_examples
from litebert.errors import DataFormatError
from litebert.metrics import conlleval

COUNTS = {  # documents / sentences / tokens
    "train": (946, 14041, 203621),
    "dev": (216, 3250, 51362),
    "test": (231, 3453, 46435),
}


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_conll_counts_iob1_and_iob2(shared_data, split):
    iob1 = read_examples(get_task("conll2003"), shared_data / "conll2003", split)
    iob2 = read_examples(get_task("conll2003-iob2"), shared_data / "conll2003" / "iob2", split)
    for ex in (iob1, iob2):
        assert (ex.stats["documents"], ex.stats["sentences"], ex.stats["tokens"]) == COUNTS[split]
    # Same sentences and words; IOB1 -> IOB2 conversion (independent, here) gives the iob2 tags.
    assert [e.words for e in iob1] == [e.words for e in iob2]
    for a, b in zip(iob1, iob2):
        converted = [
            "B-" + t[2:] if t.startswith("I-") and (i == 0 or a.labels[i - 1][2:] != t[2:]) else t
            for i, t in enumerate(a.labels)
        ]
        assert converted == b.labels
    assert any(t.startswith("B-") for e in iob1 for t in e.labels)  # IOB1 keeps B- between same-type chunks


def test_conll_errors(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("EU NNP B-NP B-ORG\nrejects\n")
    with pytest.raises(DataFormatError, match=r"bad\.txt:2: expected 'word \.\.\. tag'"):
        read_conll(path)
    path.write_text("-DOCSTART- -X- -X- O\n\nEU B-ORG\n\nx B-WEIRD\n")
    with pytest.raises(DataFormatError, match=r"bad\.txt:5: tag 'B-WEIRD' is not in the label set"):
        read_examples(get_task("conll2003-iob2"), path, "train")
    assert read_conll(path).stats == {"documents": 1, "sentences": 2, "tokens": 2}


@pytest.fixture(scope="module")
def tok(shared_data):
    from litebert.tokenizer import AlbertTokenizer

    return AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")


def test_first_subtoken_labels_and_alignment_round_trip(shared_data, tok):
    spec = get_task("conll2003")
    examples = read_examples(spec, shared_data / "conll2003", "dev")[:300]
    labels = list(spec.labels)
    feats = encode_token_examples(examples, tok, 512, labels)
    for ex, f in zip(examples, feats):
        first = [i for i, w in enumerate(f["word_ids"]) if w >= 0]
        assert [f["labels"][i] for i in first] == [labels.index(t) for t in ex.labels]
        assert sum(lab != -100 for lab in f["labels"]) == len(ex.words)
        # The sub-tokens of each word are exactly that word's encoding.
        bounds = first + [len(f["input_ids"]) - 1]
        for w, (a, b) in enumerate(zip(bounds, bounds[1:])):
            assert f["input_ids"][a:b] == (tok.encode_ids(ex.words[w]) or [tok.unk_id])
        assert f["input_ids"][0] == tok.cls_id and f["input_ids"][-1] == tok.sep_id
    # Predicting the gold id at every position (continuations included) gives back the gold tags.
    preds = [[max(lab, 0) for lab in f["labels"]] + [0] * 5 for f in feats]  # extra padding is ignored
    tags, truncated = align_predictions(examples, feats, preds, labels)
    assert truncated == 0 and tags == [e.labels for e in examples]
    assert conlleval([e.labels for e in examples], tags)["f1"] == 1.0


def test_truncated_words_are_tagged_o_and_counted(shared_data, tok):
    examples = read_examples(get_task("conll2003-iob2"), shared_data / "conll2003" / "iob2", "dev")[:50]
    labels = list(get_task("conll2003-iob2").labels)
    feats = encode_token_examples(examples, tok, 8, labels)
    assert all(len(f["input_ids"]) <= 8 for f in feats)
    kept = [sum(w >= 0 for w in f["word_ids"]) for f in feats]
    tags, truncated = align_predictions(examples, feats, [[max(x, 0) for x in f["labels"]] for f in feats], labels)
    assert truncated == sum(len(e.words) for e in examples) - sum(kept) > 0
    for ex, t, k in zip(examples, tags, kept):
        assert t[:k] == ex.labels[:k] and t[k:] == ["O"] * (len(ex.words) - k)
