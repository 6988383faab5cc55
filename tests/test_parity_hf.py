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
