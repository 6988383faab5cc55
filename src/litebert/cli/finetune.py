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

    e = add_command(sub, "evaluate", "score a fine-tuned model on a split, or a pretraining run on held-out MLM", """
litebert evaluate sst-2 --model runs/sst2 --data glue/SST-2
litebert evaluate mnli --model runs/mnli --data glue/MNLI --split dev_mismatched
litebert evaluate --model runs/base          # pretraining: held-out MLM on its store, as its eval lines""")
    e.add_argument("task_name", metavar="TASK", nargs="?",
                   help="the task the model was fine-tuned for; without it, --model is a pretraining run or model "
                        "directory, scored on held-out MLM (at [MASK], kept and random targets, the headline, the "
                        "model-free baselines, the pair accuracy) with the run's own settings")
    _shared(e, FinetuneConfig, run_defaults=True)
    e.add_argument("--data", help="task folder or a file of the split; without a TASK, a token store (default: "
                                  "the one the run trained on)")
    e.add_argument("--split", help="split to score (default: the task's dev split)")
    e.add_argument("--limit", type=int, help="score only the first N examples (default: all)")
    e.add_argument("--eval-batches", type=int, help="without a TASK: held-out batches of --batch-size sequences "
                                                    "(default: the run's)")
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


def _precision(p, run_default: bool = False) -> None:
    from litebert.device import AUTO_PRECISION_HELP, PRECISIONS

    p.add_argument("--precision", default=None if run_default else "auto", choices=PRECISIONS,
                   help=AUTO_PRECISION_HELP + (" (default: auto; without a TASK, the pretraining run's)" if run_default
                                               else " (default: auto)"))


def _shared(p, options, run_defaults: bool = False) -> None:
    """The options of evaluate and predict. `run_defaults` (evaluate): precision and batch size default to a
    pretraining run's when there is no TASK, so they are None here and the handler fills in the task defaults."""
    p.add_argument("--model", required=True, help="fine-tuning run dir (its best/ checkpoint) or model directory"
                   + ("; without a TASK, a pretraining run, demo or model directory" if run_defaults else ""))
    _precision(p, run_defaults)
    p.add_argument("--batch-size", type=int, default=None if run_defaults else 64,
                   help="examples per forward pass (default: 64" + ("; without a TASK, the run's)" if run_defaults
                                                                    else ")"))
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
    from litebert.errors import ConfigError
    from litebert.scoring import evaluate

    if args.task_name is None:
        return _evaluate_pretraining(args)
    if args.data is None:
        raise ConfigError(f"evaluate {args.task_name}: --data is required (the task folder or a file of the split)")
    if args.eval_batches is not None:
        raise ConfigError("--eval-batches is for a pretraining directory (no TASK); a task's split is scored whole "
                          "(--limit N for its first N examples)")
    result = evaluate(args.task_name, args.model, args.data, split=args.split, precision=args.precision or "auto",
                      batch_size=args.batch_size or 64, limit=args.limit,
                      allow_task_mismatch=args.allow_task_mismatch, **_custom(args))
    print(json.dumps(result, indent=2, default=str))
    return 0


def _evaluate_pretraining(args) -> int:
    """`evaluate` without a TASK: held-out MLM of a pretraining directory, the figures of its eval lines."""
    from litebert.errors import ConfigError
    from litebert.mlm_scores import summary_line
    from litebert.pretrain_eval import evaluate_pretraining

    task_only = [flag for flag, value in (("--split", args.split), ("--limit", args.limit),
                                          ("--allow-task-mismatch", args.allow_task_mismatch),
                                          *((f"--{k.replace('_', '-')}", getattr(args, k)) for k in CUSTOM))
                 if value not in (None, False)]
    if task_only:
        raise ConfigError(f"{', '.join(task_only)}: for a fine-tuning TASK; without a TASK, evaluate scores a "
                          "pretraining directory on its held-out MLM (--data STORE, --max-seq-length, --eval-batches, "
                          "--batch-size, --precision)")
    result = evaluate_pretraining(args.model, data=args.data, precision=args.precision,
                                  max_seq_length=args.max_seq_length, eval_batches=args.eval_batches,
                                  batch_size=args.batch_size)
    print(f"eval {summary_line(result)}", file=sys.stderr)  # the pretraining eval line's words
    print(json.dumps(result, indent=2, default=str))
    return 0


def run_predict(args) -> int:
    from pathlib import Path

    from litebert.files import atomic_write, check_output
    from litebert.scoring import predict

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
    from litebert.collapse import prediction_collapse

    truncated = sum(1 for r in rows if r.get("truncated_tokens", 0) > 0)
    precision = rows[0].get("precision") if rows else None
    line = (f"{len(rows)} predictions -> {'stdout' if output == '-' else output}"
            + (f"; precision {precision}" if precision else "") + f"; {truncated} truncated inputs")
    warning = prediction_collapse(rows)
    return line + (f"\nWARNING: {warning}" if warning else "")


def run_fill_mask(args) -> int:
    from litebert.families.mlm import fill_mask, filled_text, format_predictions
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
