"""Collapse findings in words: a head family's `collapse` finding on a dev split (`collapse_warning`), and the same
finding on `predict`'s rows (`prediction_collapse`)."""

from __future__ import annotations

import json




COLLAPSE_ADVICE = "Try another --lr (often lower), more steps, or check the labels"


# Per kind of `Family.collapse` finding: what every prediction is, and what that does to the score.


COLLAPSE_WORDS = {
    "constant": "every {split} prediction{at} is the same number {constant_prediction:.4g}: the regression head has "
                "collapsed to a constant, so the correlations (pearson, spearman) are undefined (NaN: a constant "
                "has no spread) and mse is that of one guess",
    "one tag": "every {split} word{at} is tagged {single_class_prediction!r}: the tagger predicts one tag only, so "
               "entity f1 is 0 while accuracy is that tag's share of the words",
    "no answer": "every {split} answer{at} is empty ({empty_answers} questions): the span head predicts no answer "
                 "at all, so only unanswerable questions score",
    "one option": "every {split} prediction{at} is option {single_option}: the model has collapsed to one option, "
                  "and its accuracy is that option's share of the split",
    "one label set": "every {split} prediction{at} is the label set {single_label_set}: the multi-label head has "
                     "collapsed to one answer",
    "one class": "every {split} prediction{at} is the class {single_class_prediction!r}: the model has collapsed to "
                 "one class, and its score is that class's share of the split",
}


def collapse_warning(collapsed: dict, split: str, step: int | None = None) -> str:
    at = f" at step {step}" if step is not None else ""
    said = COLLAPSE_WORDS[collapsed.get("collapse", "one class")].format(split=split, at=at, **collapsed)
    return f"WARNING: {said}. {COLLAPSE_ADVICE}"


def prediction_collapse(rows: list[dict]) -> str | None:
    """The same finding on predictions (`predict`'s rows, any head): what every row answers, or None."""
    if len(rows) < 2:
        return None
    for key, what in (("label", "the class"), ("labels", "the label set"), ("words", "tagged"),
                      ("answer", "the answer")):
        if key in rows[0]:
            values = ({json.dumps(w["tag"]) for r in rows for w in r[key]} if key == "words"
                      else {json.dumps(r[key]) for r in rows})
            if len(values) == 1:
                return f"every one of the {len(rows)} predictions is {what} {values.pop()}: a collapsed model"
            return None
    if "score" in rows[0] and len({r["score"] for r in rows}) == 1:
        return f"every one of the {len(rows)} predictions is the same number {rows[0]['score']:.4g}: a collapsed model"
    return None
