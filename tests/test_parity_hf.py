"""Parity with stock Hugging Face `transformers` ALBERT on random weights, both directions, every head, fp32."""

import pytest
import torch

import litebert.model as ours
from litebert import AlbertConfig

transformers = pytest.importorskip("transformers")

CONFIGS = {
    "E!=H": dict(embedding_size=16, hidden_size=32),
    "E==H": dict(embedding_size=32, hidden_size=32),
    "G2K2": dict(embedding_size=16, hidden_size=32, num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
    "none": dict(embedding_size=16, hidden_size=32, num_hidden_layers=3, sharing="none", hidden_act="relu"),
}
HEADS = ["AlbertModel", "AlbertForPreTraining", "AlbertForMaskedLM", "AlbertForSequenceClassification",
         "AlbertForTokenClassification", "AlbertForQuestionAnswering", "AlbertForMultipleChoice"]
TOL = 1e-5


def make_config(name: str) -> AlbertConfig:
    base = dict(vocab_size=120, num_hidden_layers=3, num_attention_heads=4, intermediate_size=48,
                max_position_embeddings=64, num_labels=3)
    return AlbertConfig(**{**base, **CONFIGS[name]})


def make_inputs(multiple_choice: bool):
    g = torch.Generator().manual_seed(0)
    B, L = 3, 14
    ids = torch.randint(5, 120, (B, L), generator=g)
    mask = torch.ones(B, L, dtype=torch.long)
    mask[1, 9:] = 0  # padding in one row
    mask[2, 5:] = 0
    types = torch.zeros(B, L, dtype=torch.long)
    types[:, 7:] = 1
    if multiple_choice:  # [B, C=2, L]
        ids, mask, types = (t.view(1, B, L).expand(2, B, L).transpose(0, 1).contiguous() for t in (ids, mask, types))
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def compare(ours_out, hf_out, inputs, head: str) -> None:
    mask = inputs["attention_mask"].bool()
    pairs = {
        "AlbertModel": [("sequence_output", "last_hidden_state", mask), ("pooled_output", "pooler_output", None)],
        "AlbertForPreTraining": [("mlm_logits", "prediction_logits", mask), ("sop_logits", "sop_logits", None)],
        "AlbertForMaskedLM": [("mlm_logits", "logits", mask)],
        "AlbertForSequenceClassification": [("logits", "logits", None)],
        "AlbertForTokenClassification": [("logits", "logits", mask)],
        # ours masks padding out of the span logits (it can never be an answer); compare real tokens
        "AlbertForQuestionAnswering": [("start_logits", "start_logits", mask), ("end_logits", "end_logits", mask)],
        "AlbertForMultipleChoice": [("logits", "logits", None)],
    }[head]
    for ours_name, hf_name, where in pairs:
        a, b = getattr(ours_out, ours_name), getattr(hf_out, hf_name)
        assert a.shape == b.shape, (ours_name, a.shape, b.shape)
        diff = (a - b).abs()
        diff = diff[where] if where is not None else diff
        assert diff.max().item() <= TOL, f"{head}.{ours_name}: max abs diff {diff.max().item():.2e}"


def run_both(our_model, hf_model, head):
    inputs = make_inputs(head == "AlbertForMultipleChoice")
    with torch.no_grad():
        compare(our_model.eval()(**inputs), hf_model.eval()(**inputs), inputs, head)


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("head", HEADS)
def test_ours_to_hf(tmp_path, config_name, head):
    torch.manual_seed(1)
    model = getattr(ours, head)(make_config(config_name))
    for p in model.parameters():  # move LayerNorms away from 1/0 so a wrong mapping shows
        p.data.add_(torch.randn_like(p) * 0.02)
    model.save_pretrained(tmp_path)
    hf_model, info = getattr(transformers, head).from_pretrained(tmp_path, output_loading_info=True,
                                                                 attn_implementation="eager")
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info["mismatched_keys"], info
    run_both(model, hf_model, head)


@pytest.mark.parametrize("config_name", list(CONFIGS))
@pytest.mark.parametrize("head", HEADS)
def test_hf_to_ours(tmp_path, config_name, head):
    torch.manual_seed(2)
    config = make_config(config_name)
    if head in ("AlbertForPreTraining", "AlbertForQuestionAnswering"):  # HF sizes SOP/span heads by num_labels
        config = config.replace(num_labels=2)
    hf_config = transformers.AlbertConfig(**config.to_hf_dict())
    hf_model = getattr(transformers, head)(hf_config)
    for p in hf_model.parameters():
        p.data.add_(torch.randn_like(p) * 0.02)
    hf_model.save_pretrained(tmp_path)
    model = getattr(ours, head).from_pretrained(tmp_path)
    assert model.load_report["initialised"] == [] and model.load_report["unused"] == []
    run_both(model, hf_model, head)


def test_attention_only_sharing_refuses_hf_format(tmp_path):
    from litebert.errors import LitebertError

    model = ours.AlbertModel(make_config("E!=H").replace(sharing="attention"))
    with pytest.raises(LitebertError, match="format='litebert'"):
        model.save_pretrained(tmp_path, format="hf")
    model.save_pretrained(tmp_path)  # auto -> our own format, and it round-trips
    again = ours.AlbertModel.from_pretrained(tmp_path)
    for (n1, p1), (n2, p2) in zip(model.state_dict().items(), again.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)


@pytest.mark.parametrize("config_name", ["E!=H", "G2K2"])
def test_training_steps_match_hf(tmp_path, config_name):
    """Forward parity alone leaves the backward pass unchecked. Start both from the same weights, feed the same
    MLM + SOP batches to the same optimizer (torch's AdamW, so only the models differ) for 30 steps: every step's
    loss, and the weights at the end, must agree. This is also what says a slow start of pretraining (the early
    plateau) is the architecture's, not this implementation's."""
    torch.manual_seed(3)
    # HF's SOP head applies classifier dropout to the pooled output in training; the official one (and ours)
    # has none, so switch it off to compare the rest.
    config = make_config(config_name).replace(num_labels=2, classifier_dropout_prob=0.0)
    model = ours.AlbertForPreTraining(config)
    model.save_pretrained(tmp_path)
    hf_model = transformers.AlbertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager")
    g = torch.Generator().manual_seed(4)
    opts = [torch.optim.AdamW(m.parameters(), lr=3e-3, weight_decay=0.01) for m in (model, hf_model)]
    for step in range(30):
        inputs = make_inputs(False)
        inputs["input_ids"] = torch.randint(5, 120, inputs["input_ids"].shape, generator=g)
        labels = torch.full_like(inputs["input_ids"], -100)
        where = (torch.rand(labels.shape, generator=g) < 0.3) & inputs["attention_mask"].bool()
        labels[where] = inputs["input_ids"][where]
        inputs["input_ids"] = inputs["input_ids"].masked_fill(where, 4)
        sop = torch.randint(0, 2, (labels.shape[0],), generator=g)
        losses = []
        for m, opt, kw in ((model, opts[0], {"sop_labels": sop}), (hf_model, opts[1], {"sentence_order_label": sop})):
            loss = m.train()(**inputs, labels=labels, **kw).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= 1e-4 * abs(losses[1]), (step, losses)
    model.save_pretrained(tmp_path / "after")
    trained = transformers.AlbertForPreTraining.from_pretrained(tmp_path / "after", attn_implementation="eager")
    start = transformers.AlbertForPreTraining.from_pretrained(tmp_path, attn_implementation="eager").state_dict()
    moved = 0.0
    for (name, a), b in zip(trained.state_dict().items(), hf_model.state_dict().values()):
        # The key bias shifts every score of a query row equally, so softmax cancels it: its true gradient is 0,
        # and Adam scales the rounding noise left in its place up to full-size steps. Only bounded here.
        tol = dict(atol=1e-3, rtol=0) if name.endswith("key.bias") else dict(atol=1e-5, rtol=1e-4)
        assert torch.allclose(a, b, **tol), (name, (a - b).abs().max().item())
        moved = max(moved, (a - start[name]).abs().max().item())
    assert moved > 0.05  # 30 steps at lr 3e-3 moved the weights, so agreeing on them means something
