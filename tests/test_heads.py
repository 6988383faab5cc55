"""The head-family registry (litebert.heads) is where every door's tables come from (issue 33)."""

from __future__ import annotations

import pytest

from litebert import heads
from litebert.errors import ConfigError
from tiny_models import save_model, tokenizer


def test_one_family_answers_to_each_of_its_names():
    """A QA model was `squad1.1`'s head `span`, pipeline `question-answering`, export `qa` and a class name."""
    for name in ("span", "question-answering", "qa", "AlbertForQuestionAnswering"):
        assert heads.family(name) is heads.BY_NAME["span"]
    assert heads.family("AlbertForPreTraining").name == "mlm"  # a pretraining checkpoint answers fill-mask
    assert heads.for_export("pretraining").model_class == "AlbertForPreTraining"
    with pytest.raises(ConfigError, match="not a head family"):
        heads.family("squad1.1")  # a task, not a head: get_task("squad1.1").head is "span"


def test_every_table_is_derived_from_the_rows():
    from litebert import export, model, pipelines
    from litebert.data.tasks import TASKS
    from litebert.families.base import Family

    for f in heads.FAMILIES:
        assert f.model_class in model.MODEL_CLASSES
        assert export.TASKS[f.export_task].outputs == heads.for_export(f.export_task).outputs
        if f.code:  # one class per family, in litebert/families/: the pipeline and the fine-tuning code
            cls = f.family_class()
            assert issubclass(cls, Family) and cls.__module__.startswith("litebert.families.")
            assert cls.task == f.pipeline_task and f.pipeline_task in pipelines.TASKS
        assert not f.finetuned or f.code
    assert {t.head for t in TASKS.values()} <= set(heads.FINETUNE_HEADS)


@pytest.mark.parametrize("cls, config, head, task", [
    ("AlbertForSequenceClassification", {"num_labels": 3}, "classification", "text-classification"),
    ("AlbertForSequenceClassification", {"num_labels": 1, "problem_type": "regression"}, "regression",
     "text-classification"),
    ("AlbertForTokenClassification", {"num_labels": 3}, "token", "token-classification"),
    ("AlbertForQuestionAnswering", {}, "span", "question-answering"),
    ("AlbertForMultipleChoice", {}, "choice", "multiple-choice"),
    ("AlbertForPreTraining", {}, "mlm", "fill-mask"),
    ("AlbertModel", {}, "base", "embeddings"),
])
def test_a_saved_directory_is_read_as_its_family(tmp_path, shared_data, cls, config, head, task):
    from litebert.records import read_record

    path = save_model(tmp_path / "m", cls, tokenizer(shared_data), **config)
    _, record = read_record(path)
    assert (record.head, record.task, record.architecture) == (head, task, cls)
    assert record.max_seq_length == min(heads.BY_NAME[head].default_max_length, 64)  # tiny models: 64 positions


def test_a_family_in_one_module_brings_its_serve_request_item():
    """families/choice.py builds its own request item: serve validates multiple-choice bodies by it."""
    pydantic = pytest.importorskip("pydantic")
    from litebert.serving import request_models

    Request = request_models("multiple-choice", max_items=4, max_chars=100)
    ok = Request(inputs=[{"context": "c", "question": "q", "options": ["a", "b"]}])
    assert ok.inputs[0].options == ["a", "b"]
    for bad in ({"context": "c", "question": "q", "options": ["a"]},  # one option
                {"context": "c", "question": "q", "options": ["a", "b"], "text": "x"}):  # another task's field
        with pytest.raises(pydantic.ValidationError):
            Request(inputs=[bad])
