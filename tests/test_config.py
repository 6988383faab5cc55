import json

import pytest

from litebert import AlbertConfig
from litebert.config import PRESETS
from litebert.errors import ConfigError
from litebert.params import TABLE_3, TABLE_4, count_parameters, table_rows


# The convention, written out: AlbertModel = embeddings (+ E->H projection when E != H) + encoder + pooler,
# no MLM/SOP/task head. Under it the released configs have exactly these counts (paper Table 1).
@pytest.mark.parametrize("preset, expected", [
    ("albert-base-v2", 11_683_584), ("albert-large-v2", 17_683_968),
    ("albert-xlarge-v2", 58_724_864), ("albert-xxlarge-v2", 222_595_584),
    ("albert-base-v1", 11_683_584), ("albert-xxlarge-v1", 222_595_584),
])
def test_released_parameter_counts(preset, expected):
    assert count_parameters(AlbertConfig.from_preset(preset)) == expected


def test_bert_counts_near_paper():
    assert abs(count_parameters(AlbertConfig.from_preset("bert-base")) - 108e6) < 1.5e6
    assert abs(count_parameters(AlbertConfig.from_preset("bert-large")) - 334e6) < 1.5e6


@pytest.mark.parametrize("table", [TABLE_3, TABLE_4], ids=["table3", "table4"])
def test_ablation_counts_round_to_paper(table):
    for label, n, paper, _ in table_rows(table):
        # The paper rounds (and truncates some: 87.6M is printed as 87M), so allow one million either way.
        assert abs(n / 1e6 - int(paper[:-1])) < 1.1, (label, n, paper)


def test_count_matches_real_instantiation():
    from litebert.model import AlbertModel

    config = AlbertConfig.from_preset("albert-tiny", vocab_size=1000, sharing="ffn", num_hidden_groups=2)
    assert count_parameters(config) == sum(p.numel() for p in AlbertModel(config).parameters())


def test_v2_presets_have_no_dropout():
    for name in PRESETS:
        c = AlbertConfig.from_preset(name)
        if name.endswith("-v2"):
            assert c.hidden_dropout_prob == c.attention_probs_dropout_prob == 0
    assert AlbertConfig.from_preset("albert-base-v1").hidden_dropout_prob == 0.1


@pytest.mark.parametrize("bad, field", [
    (dict(hidden_size=100, num_attention_heads=12), "divisible"),
    (dict(hidden_act="swishy"), "hidden_act"),
    (dict(sharing="some"), "sharing"),
    (dict(num_hidden_groups=13), "num_hidden_groups"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
    (dict(vocab_size=0), "vocab_size"),
    (dict(embedding_projection=False), "embedding_projection"),
])
def test_bad_config_names_the_field(bad, field):
    with pytest.raises(ConfigError, match=field):
        AlbertConfig.from_preset("albert-base", **bad)


def test_unknown_preset_lists_known():
    with pytest.raises(ConfigError, match="albert-base"):
        AlbertConfig.from_preset("albert-huge")


def test_json_dialects_round_trip(tmp_path):
    c = AlbertConfig.from_preset("albert-base", num_hidden_groups=2, inner_group_num=2)
    c.to_json(tmp_path / "ours.json")
    assert AlbertConfig.from_json(tmp_path / "ours.json") == c
    (tmp_path / "hf.json").write_text(json.dumps(c.to_hf_dict("AlbertModel")))
    assert AlbertConfig.from_json(tmp_path / "hf.json") == c
    (tmp_path / "official.json").write_text(json.dumps(c.to_official_dict()))
    back = AlbertConfig.from_json(tmp_path / "official.json")
    assert back.hidden_act == "gelu_new"  # the official "gelu" is the tanh form
    assert back.num_hidden_groups == 2 and back.hidden_size == 768


def test_old_config_files_with_gradient_checkpointing_still_load(tmp_path):
    """gradient_checkpointing left the model's config (a training option now); files written before carry it,
    true or false: they load, the key ignored, and nothing written any more holds it."""
    from litebert.model import AlbertModel

    c = AlbertConfig.from_preset("albert-tiny", vocab_size=100, num_hidden_layers=2)
    assert "gradient_checkpointing" not in c.to_dict() and "gradient_checkpointing" not in c.to_hf_dict()
    for flag in (True, False):
        (tmp_path / "ours.json").write_text(json.dumps({"format": "litebert", **c.to_dict(),
                                                        "gradient_checkpointing": flag}))
        assert AlbertConfig.from_json(tmp_path / "ours.json") == c
        (tmp_path / "hf.json").write_text(json.dumps({**c.to_hf_dict("AlbertModel"), "gradient_checkpointing": flag}))
        assert AlbertConfig.from_json(tmp_path / "hf.json") == c
    model_dir = tmp_path / "model"
    AlbertModel(c).save_pretrained(model_dir, format="litebert")
    config_file = model_dir / "config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "gradient_checkpointing": True}))
    assert AlbertModel.from_pretrained(model_dir).config == c


def test_official_json_reads_released_format(tmp_path):
    official = {"attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0,
                "embedding_size": 128, "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 16384,
                "max_position_embeddings": 512, "num_attention_heads": 64, "num_hidden_layers": 12,
                "num_hidden_groups": 1, "net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0,
                "inner_group_num": 1, "down_scale_factor": 1, "type_vocab_size": 2, "vocab_size": 30000}
    (tmp_path / "albert_config.json").write_text(json.dumps(official))
    c = AlbertConfig.from_json(tmp_path / "albert_config.json")
    assert c == AlbertConfig.from_preset("albert-xxlarge-v2").replace(layer_norm_eps=c.layer_norm_eps)


def test_hf_format_refuses_partial_sharing():
    with pytest.raises(ConfigError, match="format='litebert'"):
        AlbertConfig.from_preset("albert-base", sharing="attention").to_hf_dict()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"vocab_size": 100, "hidden_size": 64, "bogus": 1, '
                                                         '"format": "litebert"}'])
def test_bad_config_file_names_the_file(tmp_path, text):
    path = tmp_path / "cfg.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match="cfg.json"):
        AlbertConfig.from_json(path)
