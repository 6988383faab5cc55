import pytest
import torch

from litebert import AlbertConfig, AlbertForPreTraining, AlbertModel, AlbertForSequenceClassification
from litebert.errors import CheckpointError
from litebert.model import AlbertForQuestionAnswering, layer_schedule, masked_lm_loss, predicted_ids


def tiny(**kw) -> AlbertConfig:
    base = dict(vocab_size=100, embedding_size=16, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                intermediate_size=64, max_position_embeddings=64)
    return AlbertConfig(**{**base, **kw})


def batch(B=2, L=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (B, L), generator=g)
    return ids, torch.ones(B, L, dtype=torch.long), torch.zeros(B, L, dtype=torch.long)


def test_official_group_schedule():
    # L=6, G=4: layer i uses group int(i*G/L) = 0,0,1,2,2,3; K=2 inner blocks each.
    sched = layer_schedule(tiny(num_hidden_layers=6, num_hidden_groups=4, inner_group_num=2))
    assert [a // 2 for a, _ in sched[::2]] == [0, 0, 1, 2, 2, 3]
    assert [a % 2 for a, _ in sched] == [0, 1] * 6


@pytest.mark.parametrize("sharing, n_attn, n_ffn", [("all", 2, 2), ("attention", 2, 8), ("ffn", 8, 2),
                                                    ("none", 8, 8)])
def test_sharing_modes_count_sublayers(sharing, n_attn, n_ffn):
    groups = 2 if sharing != "none" else 1
    m = AlbertModel(tiny(num_hidden_layers=8, num_hidden_groups=groups, sharing=sharing))
    assert len(m.encoder.attention) == n_attn and len(m.encoder.ffn) == n_ffn


def test_projection_only_when_e_differs():
    assert AlbertModel(tiny()).encoder.project_in is not None
    assert AlbertModel(tiny(embedding_size=32)).encoder.project_in is None


def test_sparse_mlm_equals_dense_at_positions():
    torch.manual_seed(0)
    m = AlbertForPreTraining(tiny()).eval()
    ids, mask, tt = batch()
    pos = torch.tensor([[1, 4, 7], [2, 3, 9]])
    with torch.no_grad():
        dense = m(ids, mask, tt).mlm_logits  # [B, L, V]
        sparse = m(ids, mask, tt, masked_positions=pos).mlm_logits  # [B, P, V]
    assert torch.allclose(sparse, torch.gather(dense, 1, pos[..., None].expand(-1, -1, 100)), atol=1e-6)


def test_mlm_loss_matches_cross_entropy_and_global_denominator():
    logits = torch.randn(2, 3, 10)
    ids = torch.randint(0, 10, (2, 3))
    w = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    ce = torch.nn.functional.cross_entropy(logits[w.bool()], ids[w.bool()])
    assert torch.allclose(masked_lm_loss(logits, ids, w), ce)
    # With a global denominator (say 6 tokens over the whole accumulated batch) the sum is divided by it.
    assert torch.allclose(masked_lm_loss(logits, ids, w, denominator=6.0), ce * 3 / 6)


def test_predicted_ids_equal_bf16_argmax_ties_included():
    # Rounded to bf16, many logits tie at the maximum: the widened argmax must still pick the first of them.
    logits = (torch.randn(4, 26, 8000) * 0.01).round(decimals=2).bfloat16()
    ties = (logits == logits.amax(-1, keepdim=True)).sum(-1)
    assert (ties > 1).any()
    assert torch.equal(predicted_ids(logits), logits.argmax(-1))


def test_padding_does_not_change_real_tokens():
    torch.manual_seed(0)
    m = AlbertModel(tiny()).eval()
    ids, mask, tt = batch(B=1, L=6)
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], 1)
    pmask = torch.cat([mask, torch.zeros(1, 4, dtype=torch.long)], 1)
    with torch.no_grad():
        a = m(ids, mask, tt).sequence_output
        b = m(padded, pmask, torch.zeros_like(padded)).sequence_output[:, :6]
    assert torch.allclose(a, b, atol=1e-5)


def test_gradient_checkpointing_gives_same_gradients():
    """A training option set on the model (not in its config): the same gradients, fewer activations kept."""
    ids, mask, tt = batch()
    grads, kept = [], []
    for flag in (False, True):
        torch.manual_seed(0)
        m = AlbertForSequenceClassification(tiny())
        m.set_gradient_checkpointing(flag)
        sizes = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: sizes.append(t.numel()) or t, lambda t: t):  # noqa: B023
            loss = m(ids, mask, tt, labels=torch.tensor([0, 1])).loss
        loss.backward()
        grads.append(torch.cat([p.grad.flatten() for p in m.parameters() if p.grad is not None]))
        kept.append(sum(sizes))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)
    assert kept[1] < kept[0] / 2, kept  # what the backward pass keeps from the forward


def test_init_follows_official():
    m = AlbertModel(tiny(vocab_size=3000, initializer_range=0.02))
    w = m.embeddings.word_embeddings.weight
    assert w.abs().max() <= 0.04 + 1e-6  # truncated at 2 std
    assert abs(w.std().item() - 0.0176) < 0.002  # std of N(0, .02) truncated at 2 sigma = 0.88 * 0.02
    assert torch.all(m.encoder.ffn[0].up.bias == 0) and torch.all(m.encoder.ffn[0].norm.weight == 1)


def test_classification_problem_types():
    ids, mask, tt = batch()
    reg = AlbertForSequenceClassification(tiny(num_labels=1))
    assert reg(ids, mask, tt, labels=torch.tensor([0.5, 1.0])).loss.ndim == 0
    multi = AlbertForSequenceClassification(tiny(num_labels=3))
    assert multi(ids, mask, tt, labels=torch.tensor([[1.0, 0, 1], [0, 1, 0]])).loss.ndim == 0


def test_qa_answerability_head_trains_and_saves(tmp_path):
    ids, mask, tt = batch()
    m = AlbertForQuestionAnswering(tiny(qa_answerability=True))
    out = m(ids, mask, tt, start_positions=torch.tensor([1, 0]), end_positions=torch.tensor([2, 0]),
            is_impossible=torch.tensor([0, 1]))
    assert out.logits.shape == (2,) and out.loss.ndim == 0
    m.save_pretrained(tmp_path)  # not expressible in HF format -> ours
    again = AlbertForQuestionAnswering.from_pretrained(tmp_path)
    assert again.config.qa_answerability and again.load_report["format"] == "litebert"


def test_task_model_from_pretraining_checkpoint_reports_heads(tmp_path):
    AlbertForPreTraining(tiny()).save_pretrained(tmp_path)
    cls = AlbertForSequenceClassification.from_pretrained(tmp_path, num_labels=3)
    assert set(cls.load_report["initialised"]) == {"classifier.weight", "classifier.bias"}
    assert "mlm.bias" in cls.load_report["unused"] and "sop.weight" in cls.load_report["unused"]


def test_truncated_weights_name_the_file(tmp_path):
    AlbertModel(tiny()).save_pretrained(tmp_path)
    f = tmp_path / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        AlbertModel.from_pretrained(tmp_path)


def test_missing_and_misshaped_tensor_named(tmp_path):
    from safetensors.torch import load_file, save_file

    AlbertModel(tiny()).save_pretrained(tmp_path)
    f = tmp_path / "model.safetensors"
    tensors = load_file(f)
    del tensors["encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"]
    save_file(tensors, f, metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="ffn"):
        AlbertModel.from_pretrained(tmp_path)
    AlbertModel(tiny()).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match=r"word_embeddings.*shape \(100, 16\)"):
        AlbertModel.from_pretrained(tmp_path, vocab_size=50)
