"""Held-out MLM by kind of target and the model-free baselines (litebert.mlm_scores), on a batch made by hand
where every figure can be counted on paper; and the dataset's masked_kinds agree with what the input shows."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import write_pydoc_corpus  # noqa: E402

from litebert.mlm_scores import KEPT, MASKED, RANDOM, MlmTally, piece_table_from_tokens

MASK, CLS, SEP = 4, 2, 3


def hand_table():
    # 5 occurs 4 times (the commonest); after 5: 6 three times, 7 once; after 6: 5; after 7: 8; after 8: 5.
    return piece_table_from_tokens([np.array([5, 6, 5, 6, 5, 7, 8, 5, 6])], vocab_size=10)


def hand_batch():
    """[CLS] 5 [MASK] 7 9 6 [MASK] [SEP]: targets at 2 ([MASK], was 6), 3 (kept 7), 4 (random 9, was 8),
    6 ([MASK], was 5), and one padding slot (weight 0)."""
    return {"input_ids": torch.tensor([[CLS, 5, MASK, 7, 9, 6, MASK, SEP]]),
            "masked_positions": torch.tensor([[2, 3, 4, 6, 0]]),
            "masked_ids": torch.tensor([[6, 7, 8, 5, 1]]),
            "masked_weights": torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]]),
            "masked_kinds": torch.tensor([[MASKED, KEPT, RANDOM, MASKED, MASKED]], dtype=torch.int8)}


def test_the_table_holds_the_commonest_piece_and_the_commonest_follower():
    table = hand_table()
    assert table.commonest == 5 and table.tokens == 9
    assert table.next_after[[5, 6, 7, 8]].tolist() == [6, 5, 8, 5]
    assert table.next_after[[0, 4, 9]].tolist() == [5, 5, 5]  # never followed: the commonest piece


def test_a_tie_goes_to_the_smaller_piece():
    table = piece_table_from_tokens([np.array([3, 1, 3, 2, 3])], vocab_size=4)  # after 3: 1 once, 2 once
    assert table.commonest == 3 and table.next_after[3] == 1


def test_accuracy_by_kind_and_every_baseline_on_a_hand_made_batch():
    tally = MlmTally(hand_table(), MASK)
    logits = torch.zeros(1, 5, 10)
    for slot, guess in enumerate([6, 7, 1, 0, 1]):  # right at the first [MASK] and the kept target; the padding
        logits[0, slot, guess] = 1.0                 # slot's "right" answer must not count
    loss = torch.tensor([[1.0, 2.0, 3.0, 5.0, 100.0]])
    tally.add(hand_batch(), logits, loss)
    r = tally.result()
    assert (r["eval_targets_mask"], r["eval_targets_kept"], r["eval_targets_random"]) == (2, 1, 1)
    assert (r["eval_mlm_acc_mask"], r["eval_mlm_acc_kept"], r["eval_mlm_acc_random"]) == (0.5, 1.0, 0.0)
    assert r["eval_mlm_loss_mask"] == 3.0  # (1 + 5) / 2
    # commonest 5 5 5 5 vs 6 7 8 5; copy 4 7 9 4; copy-else-commonest 5 7 9 5;
    # bigram (after 5, [MASK], 7, 6) 6 5 8 5; copy-else-bigram 6 7 9 5
    assert r["eval_base_commonest"] == 0.25 and r["eval_base_copy"] == 0.25
    assert r["eval_base_copy_commonest"] == 0.5 and r["eval_base_bigram"] == 0.75
    assert r["eval_base_copy_bigram"] == 0.75
    assert r["eval_base_mask_commonest"] == 0.5 and r["eval_base_mask_bigram"] == 1.0


def test_a_kind_with_no_targets_is_nan_not_zero():
    tally = MlmTally(hand_table(), MASK)
    batch = hand_batch()
    batch["masked_kinds"] = torch.zeros_like(batch["masked_kinds"])  # every target shown as [MASK]
    tally.add(batch)
    r = tally.result()
    assert np.isnan(r["eval_mlm_acc_kept"]) and r["eval_targets_mask"] == 4


@pytest.mark.parametrize("replace", ["80/10/10", "100/0/0"])
def test_the_datasets_kinds_say_what_the_input_shows(tmp_path, replace):
    """[MASK] targets show [MASK], kept ones their own piece, random ones a non-special piece; 100/0/0 shows
    [MASK] at every target."""
    from litebert.data.pretraining import PretrainingDataset, collate_pretraining
    from litebert.data.store_build import build_store
    from litebert.tokenizer_train import train_sentencepiece

    write_pydoc_corpus(tmp_path / "corpus.txt", 60)
    train_sentencepiece([tmp_path / "corpus.txt"], tmp_path / "tok", vocab_size=300)
    store = build_store([tmp_path / "corpus.txt"], tmp_path / "tok", tmp_path / "store", validation_fraction=0.0)
    ds = PretrainingDataset(store, max_seq_length=64, max_predictions_per_seq=10, seed=1, mask_replace=replace)
    b = collate_pretraining(ds.examples(np.arange(min(len(ds), 200))))
    w = b["masked_weights"].numpy() > 0
    kinds = b["masked_kinds"].numpy()[w]
    shown = np.take_along_axis(b["input_ids"].numpy(), b["masked_positions"].numpy(), axis=1)[w]
    labels = b["masked_ids"].numpy()[w]
    mask_id = store.token_id("mask")
    assert (shown[kinds == MASKED] == mask_id).all() and (shown[kinds != MASKED] != mask_id).all()
    assert (shown[kinds == KEPT] == labels[kinds == KEPT]).all()
    assert not set(shown[kinds == RANDOM].tolist()) & set(store.special_ids)
    if replace == "100/0/0":
        assert (kinds == MASKED).all()
    else:
        share = np.bincount(kinds, minlength=3) / len(kinds)
        assert len(kinds) > 900 and abs(share[0] - 0.8) < 0.04 and abs(share[1] - 0.1) < 0.03
