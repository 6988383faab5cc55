"""The one JSON reading ladder (files.read_json / parse_json) and the readers that now go through it."""

import json
import re

import pytest

from litebert.errors import CheckpointError, ConfigError, ConversionError, DataFormatError
from litebert.files import parse_json, read_json


def _at(path) -> str:
    return re.escape(str(path))


def test_every_rung_of_the_ladder_names_the_file(tmp_path):
    path = tmp_path / "x.json"
    with pytest.raises(ConfigError, match=rf"^{_at(path)}: config file not found$"):
        read_json(path, ConfigError, "config file not found")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(ConfigError, match=rf"^{_at(tmp_path / 'dir.json')}: cannot read \("):
        read_json(tmp_path / "dir.json", ConfigError)
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(ConfigError, match=rf"^{_at(path)}: invalid UTF-8 \(invalid start byte at byte 7\)$"):
        read_json(path, ConfigError)
    path.write_text('{\n  "a": 1,\n  "b": oops\n}\n')
    with pytest.raises(ConfigError, match=rf"^{_at(path)}:3: not valid JSON \(Expecting value at column 8\)$"):
        read_json(path, ConfigError)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match=rf"^{_at(path)}: JSON nested too deeply to read$"):
        read_json(path, ConfigError)
    path.write_text("[1, 2]")
    assert read_json(path, ConfigError) == [1, 2]  # no type asked for
    with pytest.raises(ConfigError, match=rf"^{_at(path)}: expected a JSON object, got list; rebuild it$"):
        read_json(path, ConfigError, expect=dict, hint="rebuild it")
    path.write_text('{"a": [1, {"b": null}]}')
    assert read_json(str(path), ConfigError, expect=dict) == {"a": [1, {"b": None}]}


def test_parse_json_counts_lines_from_the_record_it_is_given():
    assert parse_json('{"t": "x"}', "c.jsonl", DataFormatError, line=7) == {"t": "x"}
    with pytest.raises(DataFormatError, match=r"^c\.jsonl:7: not valid JSON \(Expecting ',' delimiter at column 11\)"
                                             r"; fix it$"):
        parse_json('{"t": "x" "u"}', "c.jsonl", DataFormatError, line=7, hint="fix it")
    with pytest.raises(DataFormatError, match=r"^c\.jsonl:5: JSON nested too deeply to read$"):
        parse_json("[" * 100_000, "c.jsonl", DataFormatError, line=5)
    with pytest.raises(DataFormatError, match=r"^--config c\.json:2: not valid JSON"):
        parse_json("{\n,}", "--config c.json", DataFormatError)


def test_a_damaged_fine_tuning_record_is_an_error_naming_it(tmp_path):
    """finetune_run.run_record raised a bare JSONDecodeError (a traceback in the CLI) on a damaged finetune.json."""
    from litebert.finetune_run import run_record

    (tmp_path / "best").mkdir()
    record = tmp_path / "finetune.json"
    record.write_text('{"task": "sst-2", ')
    with pytest.raises(CheckpointError, match=rf"^{_at(record)}:1: not valid JSON"):
        run_record(tmp_path / "best")
    record.write_text('["sst-2"]')
    with pytest.raises(CheckpointError, match=rf"^{_at(record)}: expected a JSON object, got list"):
        run_record(tmp_path)
    record.write_text(json.dumps({"task": "sst-2"}))
    assert run_record(tmp_path / "best") == {"task": "sst-2"} == run_record(tmp_path)


def test_an_official_config_that_is_not_an_object_is_refused(tmp_path):
    """convert.tf_map took any JSON value as the ALBERT config (a list was then reported as missing every field)."""
    from litebert.convert.tf_map import _load_config

    config = tmp_path / "albert_config.json"
    config.write_text("[]")
    with pytest.raises(ConversionError, match=rf"^{_at(config)}: expected an ALBERT config \(a JSON object\), got"):
        _load_config(config, tmp_path)
    config.write_text('{"hidden_size": 8')
    with pytest.raises(ConversionError, match=rf"^{_at(config)}:1: not valid JSON"):
        _load_config(None, tmp_path)  # found beside the checkpoint
    with pytest.raises(ConversionError, match="ALBERT config not found"):
        _load_config(tmp_path / "absent.json", tmp_path)


@pytest.mark.parametrize("index, problem", [
    ('{"weight_map": ', r":1: not valid JSON"),
    ('[]', r": expected a safetensors index, got list"),
    ('{"weight_map": ["a.safetensors"]}', r": not a safetensors index \(weight_map should map"),
    ('{"weight_map": {"w": 3}}', r": not a safetensors index \(weight_map should map"),
])
def test_a_bad_safetensors_index_is_named(tmp_path, index, problem):
    from litebert.convert.entry import _read_safetensors

    path = tmp_path / "model.safetensors.index.json"
    path.write_text(index)
    with pytest.raises(ConversionError, match=f"^{_at(path)}{problem}"):
        _read_safetensors(tmp_path)


def test_a_damaged_commit_marker_is_named_and_skipped(tmp_path):
    from litebert.checkpoint import COMMIT, find_latest_checkpoint, save_checkpoint, validate_checkpoint

    for step in (1, 2):
        save_checkpoint(tmp_path, step, {"w.bin": lambda p: p.write_bytes(b"x")})
    commit = tmp_path / "checkpoint-2" / COMMIT
    commit.write_text('{"step": 2,')
    with pytest.raises(CheckpointError, match=rf"^{_at(commit)}:1: not valid JSON \(.*\); the commit marker is "
                                              "damaged: resume from an earlier checkpoint$"):
        validate_checkpoint(commit.parent)
    assert find_latest_checkpoint(tmp_path) == tmp_path / "checkpoint-1"
    commit.write_bytes(b"\xff\xfe")
    with pytest.raises(CheckpointError, match=rf"^{_at(commit)}: invalid UTF-8"):
        validate_checkpoint(commit.parent)
