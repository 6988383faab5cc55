"""`litebert finetune | evaluate | predict | fill-mask`."""

import json
import sys

from litebert.cli._common import add_dataclass_args, dataclass_from_args

CUSTOM = ("format", "text_columns", "label_column", "head")


def register(sub) -> None:
    from litebert.finetune import FinetuneConfig

    p = sub.add_parser("finetune", help="fine-tune on a task (GLUE, SQuAD, RACE, NER, Chinese, custom CSV/JSONL)")
    p.add_argument("task_name", metavar="TASK", help="task name (e.g. sst-2, squad1.1, race, conll2003) or custom")
    add_dataclass_args(p, FinetuneConfig, required=("model", "data"), skip=("task",))
    p.set_defaults(func=run_finetune)

    e = sub.add_parser("evaluate", help="score a fine-tuned model on a split")
    e.add_argument("task_name", metavar="TASK")
    _shared(e)
    e.add_argument("--data", required=True, help="task folder or file")
    e.add_argument("--split", help="default: the task's dev split")
    e.add_argument("--limit", type=int, help="only the first N examples")
    e.set_defaults(func=run_evaluate)

    q = sub.add_parser("predict", help="write JSONL predictions for a file in the task's format")
    q.add_argument("task_name", metavar="TASK")
    _shared(q)
    q.add_argument("--input", required=True, help="input file (the task's test format)")
    q.add_argument("--output", default="-", help="JSONL output path (default: stdout)")
    q.set_defaults(func=run_predict)

    f = sub.add_parser("fill-mask", help="top predictions for each [MASK] in a text")
    f.add_argument("--model", required=True, help="model directory (a pretraining checkpoint works)")
    f.add_argument("texts", nargs="+", help='e.g. "the capital of france is [MASK]."')
    f.add_argument("--top-k", type=int, default=5)
    f.set_defaults(func=run_fill_mask)


def _shared(p) -> None:
    p.add_argument("--model", required=True, help="fine-tuning run dir or model directory")
    p.add_argument("--precision", default="auto")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-seq-length", type=int)
    for name in CUSTOM:
        p.add_argument("--" + name.replace("_", "-"))


def _custom(args) -> dict:
    out = {k: getattr(args, k) for k in CUSTOM if getattr(args, k) is not None}
    if args.max_seq_length:
        out["max_seq_length"] = args.max_seq_length
    return out


def run_finetune(args) -> int:
    from litebert.finetune import FinetuneConfig, finetune

    result = finetune(dataclass_from_args(FinetuneConfig, args, task=args.task_name))
    print(json.dumps(result, indent=2, default=str))
    return 0


def run_evaluate(args) -> int:
    from litebert.finetune import evaluate

    result = evaluate(args.task_name, args.model, args.data, split=args.split, precision=args.precision,
                      batch_size=args.batch_size, limit=args.limit, **_custom(args))
    print(json.dumps(result, indent=2, default=str))
    return 0


def run_predict(args) -> int:
    from pathlib import Path

    from litebert.files import atomic_write, check_output
    from litebert.finetune import predict

    if args.output != "-":
        check_output(args.output, "--output", kind="file")
    rows = predict(args.task_name, args.model, args.input, precision=args.precision, batch_size=args.batch_size,
                   **_custom(args))
    lines = "".join(json.dumps(row, ensure_ascii=False, default=float) + "\n" for row in rows)
    if args.output == "-":
        sys.stdout.write(lines)
        return 0
    # A temp file renamed into place: a full disk leaves no truncated file that looks finished.
    atomic_write(Path(args.output), lambda tmp: tmp.write_text(lines, encoding="utf-8"))
    print(f"{len(rows)} predictions -> {args.output}", file=sys.stderr)
    return 0


def run_fill_mask(args) -> int:
    from litebert.inference import fill_mask

    for text, masks in zip(args.texts, fill_mask(args.model, args.texts, top_k=args.top_k)):
        print(text)
        for i, preds in enumerate(masks):
            print(f"  [MASK] #{i + 1}: " + "  ".join(f"{p.token} ({p.score:.3f})" for p in preds))
    return 0
