"""Conversion: foreign ALBERT checkpoints in, Hugging Face names out, all in one place.

Entry point: `convert_checkpoint(src, out)` (what `litebert convert` calls) turns a TF / TF-Hub / albert_zh
checkpoint or a Hugging Face directory into a litebert model directory. The pieces, in the order data flows:

    tf_bundle.py   the TF tensor-bundle reader (.index SSTable + .data shards, CRC-32C), pure numpy
    tf_map.py      official TF / TF-Hub / albert_zh variable names -> Hugging Face names, as tables; the
                   official albert_config.json is read through AlbertConfig.from_official_dict (config.py)
    hf_map.py      Hugging Face names <-> ours, as tables (also what save_pretrained(format="hf") writes)
    entry.py       convert_checkpoint: picks the reader, builds the litebert model, picks the tokenizer

Nothing here downloads or imports TensorFlow; the writers of fake TF checkpoints live in tests/tf_fixtures.py.
"""

from litebert.convert.entry import HEADS, SOURCES, ConversionReport, convert_checkpoint, load_hf_albert
from litebert.convert.tf_map import load_tf_albert

__all__ = ["HEADS", "SOURCES", "ConversionReport", "convert_checkpoint", "load_hf_albert", "load_tf_albert"]
