"""Span question answering (SQuAD v1.1/v2.0, CMRC 2018): the whole head family in one module. The model class is
`AlbertForQuestionAnswering` (model.py). Long contexts go through doc-stride windows (data/squad.py); a SQuAD
v2 head may answer "" (no answer) when its null odds pass `null_threshold`.

Result schema, at every door: {"answer", "start", "end" (character offsets into the context; None for no answer),
"score", "null_odds", "truncated_tokens"}."""

from __future__ import annotations

from litebert.data.squad import SquadExample, convert_examples_to_features, decode_answers, squad_references
from litebert.families.base import Family, need_dict, need_text


class QuestionAnswering(Family):
    task = "question-answering"
    params = ("null_threshold",)
    request = ("QAItem", "QAParams")
    warmup = {"question": "what?", "context": "warm up"}
    from_request = classmethod(lambda cls, item: item)

    def check(self, item, index):
        item = need_dict(item, ("question", "context"), index)
        return need_text(item["question"], "question", index), need_text(item["context"], "context", index)

    def example(self, item, index):
        # is_impossible: no gold answer to look for (it only shapes training targets, which are unused here)
        return SquadExample(str(index), item[0], item[1], [], [], True)

    def echo(self, ex):
        return {"id": ex.qid, "question": ex.question}

    def encode(self, examples):
        r = self.record
        return convert_examples_to_features(examples, self.tokenizer, r.max_seq_length, r.doc_stride,
                                            r.max_query_length)

    def answers(self, examples, feats, outputs, null_threshold: float = 0.0) -> dict:
        """{qid: data.squad.Answer}: the best span per question over all its windows."""
        r = self.record
        return decode_answers(examples, feats, [o["start_logits"] for o in outputs],
                              [o["end_logits"] for o in outputs], r.n_best, r.max_answer_length, null_threshold,
                              r.version_2)

    def decode(self, examples, feats, outputs, null_threshold: float = 0.0):
        answers = self.answers(examples, feats, outputs, null_threshold)
        cut = {f["example_index"]: f["truncated_tokens"] for f in feats}  # per question (its windows agree)
        return [{"answer": a.text, "start": a.start, "end": a.end, "score": a.score, "null_odds": a.null_odds,
                 "truncated_tokens": cut.get(i, 0)} for i, a in enumerate(answers[ex.qid] for ex in examples)]

    # training and scoring
    @staticmethod
    def num_labels(label_list) -> int:
        return 2

    def targets(self, batch):
        keys = ("start_positions", "end_positions", "is_impossible")
        return {k: batch[k] for k in keys if k in batch}

    def collapse(self, examples, feats, outputs, spec):
        answers = self.answers(examples, feats, outputs)
        if len(answers) > 1 and not any(a.text for a in answers.values()):
            return {"collapse": "no answer", "empty_answers": len(answers)}
        return {}

    def score(self, examples, feats, outputs, spec):
        from litebert.metrics import cmrc2018, squad_v1, squad_v2

        answers = self.answers(examples, feats, outputs)
        preds = {q: a.text for q, a in answers.items()}
        refs = squad_references(examples)
        if spec.format == "cmrc2018":
            return cmrc2018(refs, preds)
        if spec.version_2:
            return squad_v2(refs, preds, na_probs={q: a.null_odds for q, a in answers.items()})
        return squad_v1(refs, preds)
