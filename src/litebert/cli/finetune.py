"""`litebert finetune | evaluate | predict | fill-mask`."""

import dataclasses
import json
import sys

from litebert.cli._common import (add_alias, add_command, add_config_option, add_dataclass_args, dataclass_from_args,
                                  field_help, print_config)

CUSTOM = ("format", "text_columns", "label_column", "head")  # evaluate and predict take these fine-tuning options

def register(sub) -> None:
    from litebert.finetune import FinetuneConfig

    p = add_command(sub, "finetune", "fine-tune on a task (GLUE, SQuAD, RACE, NER, Chinese, custom CSV/JSONL)", """
litebert finetune sst-2 --model runs/base --data glue/SST-2 --out runs/sst2
litebert finetune custom --format csv --text-columns review --label-column stars --model runs/base \\
    --data mydata/ --out runs/stars
litebert finetune --config runs/sst2/finetune.json --out runs/sst2-again     # repeat a run""")
    p.add_argument("task_name", metavar="TASK", nargs="?",
                   help="task name (e.g. sst-2, mnli, squad1.1, race, conll2003, lcqmc) or custom (default: the "
                        "task of --config)")
    add_config_option(p)
    add_dataclass_args(p, FinetuneConfig, required=("model", "data"), skip=("task", "grad_accum"))
    add_alias(p, "--grad-accum", "grad_accum", type=int)  # old: --batch-size was the micro batch
    add_alias(p, "--task", "task")  # the task of a --config run record
    p.config_ignore = ()
    p.set_defaults(func=run_finetune, grad_accum=None)

    e = add_command(sub, "evaluate", "score a fine-tuned model on a split", """
litebert evaluate sst-2 --model runs/sst2 --data glue/SST-2
litebert evaluate mnli --model runs/mnli --data glue/MNLI --split dev_mismatched""")
    e.add_argument("task_name", metavar="TASK", help="the task the model was fine-tuned for")
    _shared(e, FinetuneConfig)
    e.add_argument("--data", required=True, help="task folder or a file of the split")
    e.add_argument("--split", help="split to score (default: the task's dev split)")
    e.add_argument("--limit", type=int, help="score only the first N examples (default: all)")
    e.set_defaults(func=run_evaluate)

    q = add_command(sub, "predict", "write JSONL predictions for a file in the task's format, or for --text", """
litebert predict sst-2 --model runs/sst2 --input glue/SST-2/test.tsv --output preds.jsonl
litebert predict sst-2 --model runs/sst2 --text "a gripping film" --text "dull and long"
litebert predict rte --model runs/rte --text $'A man sleeps.\\tSomeone is awake.'   # a pair: tab between""")
    q.add_argument("task_name", metavar="TASK", help="the task the model was fine-tuned for")
    _shared(q, FinetuneConfig)
    q.add_argument("--input", help="input file in the task's test format (labels not needed)")
    q.add_argument("--text", action="append", metavar="TEXT",
                   help="a text to classify, instead of --input; repeatable; a pair task takes 'first<TAB>second'")
    q.add_argument("--output", default="-", help="JSONL output path (default: stdout)")
    q.set_defaults(func=run_predict)

    f = add_command(sub, "fill-mask", "top predictions for each [MASK] in a text",
                    'litebert fill-mask --model runs/demo "the capital of france is [MASK]."')
    f.add_argument("--model", required=True, help="model directory or pretraining run dir (its newest checkpoint)")
    f.add_argument("texts", nargs="+", metavar="TEXT", help='e.g. "the capital of france is [MASK]."')
    f.add_argument("--top-k", type=int, default=5, help="predictions shown per [MASK] (default: 5)")
    _precision(f)
    f.set_defaults(func=run_fill_mask)


def _precision(p) -> None:
    from litebert.device import AUTO_PRECISION_HELP, PRECISIONS

    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help=AUTO_PRECISION_HELP + " (default: auto)")


def _shared(p, options) -> None:
    p.add_argument("--model", required=True, help="fine-tuning run dir (its best/ checkpoint) or model directory")
    _precision(p)
    p.add_argument("--batch-size", type=int, default=64, help="examples per forward pass (default: 64)")
    p.add_argument("--max-seq-length", type=int,
                   help="tokens per example (default: the run's, from its record; else the task's)")
    p.add_argument("--allow-task-mismatch", action="store_true",
                   help="run a model fine-tuned for another task than TASK (default: refuse); the output says so")
    for f in dataclasses.fields(options):
        if f.name in CUSTOM:
            p.add_argument("--" + f.name.replace("_", "-"), choices=f.metadata.get("choices"), help=field_help(f))


def _custom(args) -> dict:
    out = {k: getattr(args, k) for k in CUSTOM if getattr(args, k) is not None}
    if args.max_seq_length:
        out["max_seq_length"] = args.max_seq_length
    return out


def run_finetune(args) -> int:
    from litebert.errors import ConfigError
    from litebert.finetune import FinetuneConfig, finetune

    task = args.task_name or getattr(args, "task", None)
    if not task:
        raise ConfigError("give the TASK (e.g. litebert finetune sst-2 ...), or --config with a task")
    cfg = dataclass_from_args(FinetuneConfig, args, task=task)
    if args.print_config:
        print_config(cfg)
        return 0
    result = finetune(cfg)
    print(json.dumps(result, indent=2, default=str))
    return 0


def run_evaluate(args) -> int:
    from litebert.finetune import evaluate

    result = evaluate(args.task_name, args.model, args.data, split=args.split, precision=args.precision,
                      batch_size=args.batch_size, limit=args.limit, allow_task_mismatch=args.allow_task_mismatch,
                      **_custom(args))
    print(json.dumps(result, indent=2, default=str))
    return 0


def run_predict(args) -> int:
    from pathlib import Path

    from litebert.files import atomic_write, check_output
    from litebert.finetune import predict

    if args.output != "-":
        check_output(args.output, "--output", kind="file")
    rows = predict(args.task_name, args.model, args.input, precision=args.precision, batch_size=args.batch_size,
                   texts=args.text, allow_task_mismatch=args.allow_task_mismatch, **_custom(args))
    lines = "".join(json.dumps(row, ensure_ascii=False, default=float) + "\n" for row in rows)
    if args.output == "-":
        sys.stdout.write(lines)
    else:  # a temp file renamed into place: a full disk leaves no truncated file that looks finished
        atomic_write(Path(args.output), lambda tmp: tmp.write_text(lines, encoding="utf-8"))
    print(predict_summary(rows, args.output), file=sys.stderr)
    return 0


def predict_summary(rows: list[dict], output: str) -> str:
    """One line after the predictions: how many, at which precision, how many inputs were truncated, collapse."""
    from litebert.finetune import prediction_collapse

    truncated = sum(1 for r in rows if r.get("truncated_tokens", 0) > 0)
    precision = rows[0].get("precision") if rows else None
    line = (f"{len(rows)} predictions -> {'stdout' if output == '-' else output}"
            + (f"; precision {precision}" if precision else "") + f"; {truncated} truncated inputs")
    warning = prediction_collapse(rows)
    return line + (f"\nWARNING: {warning}" if warning else "")


def run_fill_mask(args) -> int:
    from litebert.inference import fill_mask, filled_text, format_predictions
    from litebert.pipelines import inference_precision

    precision = inference_precision(args.precision)
    results = fill_mask(args.model, args.texts, top_k=args.top_k, precision=precision)
    print(f"fill-mask: {args.model} at precision {precision}", file=sys.stderr)
    for text, masks in zip(args.texts, results):
        print(text)
        print("  -> " + filled_text(text, masks))
        for i, preds in enumerate(masks):
            print(f"  [MASK] #{i + 1}: " + format_predictions(preds))
    return 0
