"""RACE: reading the original layout (counts from shared/data/README.md) and the official features."""

import json

import pytest

from litebert.data.race import RaceExample, encode_race, qa_text, race_accuracy, read_race
from litebert.data.tasks import get_task, pad_features, read_examples
from litebert.errors import DataFormatError

COUNTS = {  # split: {level: (passages, questions)}
    "dev": {"high": (1021, 3451), "middle": (368, 1436)},
    "test": {"high": (1045, 3498), "middle": (362, 1436)},
}


@pytest.mark.parametrize("split", ["dev", "test"])
def test_race_counts_per_level(shared_data, split):
    examples = read_examples(get_task("race"), shared_data / "race", split)
    for level, (passages, questions) in COUNTS[split].items():
        assert (examples.stats[f"passages_{level}"], examples.stats[f"questions_{level}"]) == (passages, questions)
        assert sum(ex.level == level for ex in examples) == questions
        assert len(read_race(shared_data / "race" / split / level)) == questions  # a level folder alone
    assert len(examples) == {"dev": 4887, "test": 4934}[split]
    assert all(len(ex.options) == 4 and ex.label in range(4) for ex in examples)


@pytest.fixture(scope="module")
def tok(shared_data):
    from litebert.tokenizer import AlbertTokenizer

    return AlbertTokenizer(shared_data / "albert-vocab" / "30k-clean.model")


def test_qa_text_fills_blanks_or_appends():
    assert qa_text("The man went to the _ to buy _ .", "shop") == "The man went to the shop to buy shop ."
    assert qa_text("Why did he leave?", "He was tired.") == "Why did he leave? He was tired."


def test_features_crafted_example(tok):
    article = " ".join(f"word{i}" for i in range(300))
    question = "according to the long and winding passage , the writer thinks that _ is the best choice for us"
    options = ["the first option", "a second one", "option number three", "the fourth"]
    ex = RaceExample("x-0", article, question, options, 2, "high")
    feats = encode_race([ex], tok, max_seq_length=64, max_qa_length=10)
    (f,) = feats
    assert f["label"] == 2 and f["level"] == "high" and len(f["input_ids"]) == 4
    passage = tok.encode_ids(article)
    for c, option in enumerate(options):
        qa = tok.encode_ids(question.replace("_", option))
        ids = f["input_ids"][c]
        assert len(ids) == 64  # the passage is cut so the whole sequence fits exactly
        # qa keeps its LAST 10 tokens (cut from the left), then [SEP]
        assert ids[-11:-1] == qa[-10:] and ids[-1] == tok.sep_id
        assert ids[0] == tok.cls_id and ids[: 64 - 11] == [tok.cls_id, *passage[: 64 - 13], tok.sep_id]
        assert f["token_type_ids"][c] == [0] * (64 - 11) + [1] * 11
        assert f["attention_mask"][c] == [1] * 64
    # Short inputs are not padded, and a question without "_" gets "question option".
    short = RaceExample("y-0", "A short passage.", "What is it?", ["a", "b", "c", "d"], 0, "middle")
    (g,) = encode_race([short], tok, max_seq_length=64, max_qa_length=10)
    assert g["input_ids"][1] == [tok.cls_id, *tok.encode_ids("A short passage."), tok.sep_id,
                                 *tok.encode_ids("What is it? b"), tok.sep_id]  # fmt: skip


def test_features_on_dev(shared_data, tok):
    examples = read_race(shared_data / "race" / "dev" / "middle")[:40]
    feats = encode_race(examples, tok)  # official 512 / 128
    for ex, f in zip(examples, feats):
        assert f["label"] == ex.label and all(len(ids) <= 512 for ids in f["input_ids"])
        for ids, types in zip(f["input_ids"], f["token_type_ids"]):
            assert ids.count(tok.sep_id) == 2 and types.count(1) <= 129
    batch = pad_features(feats[:5], pad_id=tok.pad_id)
    width = max(len(ids) for f in feats[:5] for ids in f["input_ids"])
    assert batch["input_ids"].shape == batch["attention_mask"].shape == (5, 4, width)
    assert batch["label"].tolist() == [ex.label for ex in examples[:5]] and batch["level"] == ["middle"] * 5
    assert batch["attention_mask"].sum().item() == sum(len(ids) for f in feats[:5] for ids in f["input_ids"])


def test_race_accuracy_per_level():
    ex = [RaceExample(str(i), "", "", ["a"] * 4, lab, lv)
          for i, (lab, lv) in enumerate([(0, "middle"), (1, "middle"), (2, "high"), (3, "high"), (0, "high")])]
    out = race_accuracy(ex, [0, 0, 2, 3, 1])
    assert out["accuracy"] == pytest.approx(3 / 5)
    assert out["accuracy_middle"] == 0.5 and out["accuracy_high"] == pytest.approx(2 / 3)
    assert (out["total_middle"], out["total_high"]) == (2, 3)


def test_race_errors(tmp_path):
    good = {"article": "a", "questions": ["q"], "options": [["1", "2", "3", "4"]], "answers": ["B"], "id": "h1"}
    (tmp_path / "1.txt").write_text(json.dumps({**good, "answers": ["E"]}))
    with pytest.raises(DataFormatError, match=r"1\.txt: question 0: answer 'E'"):
        read_race(tmp_path)
    (tmp_path / "1.txt").write_text(json.dumps({**good, "options": [["1", "2", "3"]]}))
    with pytest.raises(DataFormatError, match="has 3 options"):
        read_race(tmp_path)
    (tmp_path / "1.txt").write_text(json.dumps({k: v for k, v in good.items() if k != "article"}))
    with pytest.raises(DataFormatError, match="no field 'article'"):
        read_race(tmp_path)
    (tmp_path / "1.txt").write_text("{not json")
    with pytest.raises(DataFormatError, match=r"1\.txt:1: not valid JSON \(.*\); a RACE file holds one JSON object"):
        read_race(tmp_path)
