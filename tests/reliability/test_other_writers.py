"""Promise 4 for the writers beside the trainer: `export-onnx` and `data merge` on a full disk.

A full disk (a real tmpfs, filled) ends in one line naming the file and exit code 2; what was there before is
unchanged (the export folder is written whole into a temporary sibling and swapped in) and nothing half-written
is left under a final name. An export of a directory without a tokenizer is refused (it could not be served).
"""

from __future__ import annotations


import pytest

from litebert.cli import main as cli_main


@pytest.fixture(scope="module")
def classifier(tiny_data, tmp_path_factory):
    """A tiny sentence classifier saved with the tiny_data tokenizer."""
    import torch

    import litebert
    from litebert.tokenizer import load_tokenizer

    _, tokenizer, model_json = tiny_data
    config = litebert.AlbertConfig.from_json(model_json)
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("clf") / "model"
    litebert.AlbertForSequenceClassification(config).save_pretrained(out, tokenizer=load_tokenizer(tokenizer))
    return out


def _snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_onnx_on_a_full_disk_keeps_the_previous_export(classifier, small_disk, capsys):
    pytest.importorskip("onnx")
    disk = small_disk.mount(16 << 20)
    out = disk / "export"
    assert cli_main(["export-onnx", str(classifier), "--out", str(out), "--no-verify"]) == 0
    capsys.readouterr()
    before = _snapshot(out)
    graph_size = len(before["model.onnx"])
    small_disk.fill(disk, graph_size // 2)  # room for half a graph: today a truncated model.onnx replaces the good one
    assert cli_main(["export-onnx", str(classifier), "--out", str(out), "--no-verify"]) == 2
    err = capsys.readouterr().err
    assert f"litebert: error: {out / 'model.onnx'}: cannot write the export (the disk is full" in err, err
    assert "Traceback" not in err
    assert _snapshot(out) == before
    assert sorted(p.name for p in disk.iterdir()) == ["export", "filler"]  # no staging folder left behind


def test_export_onnx_without_a_tokenizer_is_refused(classifier, tmp_path, capsys):
    pytest.importorskip("onnx")
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(classifier, bare)
    for name in ("spiece.model", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
        (bare / name).unlink(missing_ok=True)
    assert cli_main(["export-onnx", str(bare), "--out", str(tmp_path / "export"), "--no-verify"]) == 2
    err = capsys.readouterr().err
    assert f"litebert: error: {bare} has no tokenizer" in err and "--graph-only" in err, err
    assert not (tmp_path / "export").exists() or not any((tmp_path / "export").iterdir())
    assert cli_main(["export-onnx", str(bare), "--out", str(tmp_path / "graph"), "--no-verify", "--graph-only"]) == 0
    assert sorted(p.name for p in (tmp_path / "graph").iterdir()) == ["config.json", "model.onnx"]
    assert "graph only" in capsys.readouterr().out


# --------------------------------------------------------------------------------- data merge


def _two_files(root, text):
    docs = text.split("\n\n")
    half = len(docs) // 2
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text("\n\n".join(docs[:half]) + "\n", encoding="utf-8")
    (root / "b.txt").write_text("\n\n".join(docs[half:]) + "\n", encoding="utf-8")
    return [root / "a.txt", root / "b.txt"]


def _parts(tiny_data, where, corpus_dir):
    from litebert.data.merge import build_part

    _, tokenizer, _ = tiny_data
    return [build_part(corpus_dir, tokenizer, where / f"part{i}", i, 2, workers=1, validation_fraction=0.05).path
            for i in range(2)]


def test_data_merge_on_a_full_disk_is_one_line_and_the_parts_survive(tiny_data, small_disk, capsys):
    store, _, _ = tiny_data
    disk = small_disk.mount(8 << 20)
    _two_files(disk / "corpus", (store.parent / "corpus.txt").read_text(encoding="utf-8"))
    parts = _parts(tiny_data, disk, disk / "corpus")
    before = {p: _snapshot(p) for p in parts}
    small_disk.fill(disk, 0)
    assert cli_main(["data", "merge", *map(str, parts), "--out", str(disk / "merged")]) == 2  # today: shutil.Error
    err = capsys.readouterr().err
    assert err.startswith(f"litebert: error: {disk / 'merged'}: cannot write the merged store (the disk is full"), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert {p: _snapshot(p) for p in parts} == before
    assert not (disk / "merged").exists()


def test_parts_cut_from_different_texts_of_equal_sizes_do_not_merge(tiny_data, tmp_path, capsys):
    """Machine 1 and machine 2 list the same paths with the same sizes, but file a.txt differs (a letter swapped
    in every word's place: same bytes count). Today the listing digest (paths and sizes) lets them merge."""
    from litebert.data.merge import build_part

    store, tokenizer, _ = tiny_data
    text = (store.parent / "corpus.txt").read_text(encoding="utf-8")
    files = _two_files(tmp_path / "corpus", text)
    part0 = build_part(tmp_path / "corpus", tokenizer, tmp_path / "part0", 0, 2, workers=1,
                       validation_fraction=0.05).path
    original = files[0].read_bytes()
    files[0].write_bytes(original.replace(b"the", b"teh"))  # the other machine's copy: same size, other text
    assert files[0].stat().st_size == len(original)
    part1 = build_part(tmp_path / "corpus", tokenizer, tmp_path / "part1", 1, 2, workers=1,
                       validation_fraction=0.05).path
    assert cli_main(["data", "merge", str(part0), str(part1), "--out", str(tmp_path / "merged")]) == 2
    err = capsys.readouterr().err
    assert "input file 1 of the listing has other content" in err and "different texts" in err, err
    assert part0.exists() and part1.exists() and not (tmp_path / "merged").exists()


# --------------------------------------------------------------------------------- fine-tuning's best/


def test_a_failed_best_save_leaves_the_previous_best_whole(classifier, small_disk):
    """Today best/ is written file by file in place: a full disk left new weights beside the old
    eval_metrics.json, or a best/ without its tokenizer."""
    import litebert
    from litebert.errors import LitebertError
    from litebert.finetune_run import save_best
    from litebert.tokenizer import load_tokenizer

    disk = small_disk.mount(8 << 20)
    model = litebert.AlbertForSequenceClassification.from_pretrained(classifier)
    tokenizer = load_tokenizer(classifier)
    save_best(model, tokenizer, disk, {"step": 10, "accuracy": 0.5})
    before = _snapshot(disk / "best")
    assert {"model.safetensors", "config.json", "eval_metrics.json", "spiece.model"} <= set(before)
    small_disk.fill(disk, len(before["model.safetensors"]) // 2)
    with pytest.raises((LitebertError, OSError)):
        save_best(model, tokenizer, disk, {"step": 20, "accuracy": 0.9})
    assert _snapshot(disk / "best") == before
    assert sorted(p.name for p in disk.iterdir()) == ["best", "filler"]
