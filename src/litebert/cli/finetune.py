"""`litebert finetune | evaluate | predict | fill-mask`."""

import json
import sys

from litebert.cli._common import add_alias, add_command, add_config_option, add_dataclass_args, dataclass_from_args

CUSTOM = ("format", "text_columns", "label_column", "head")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")

HELP = {
    "model": "a model directory (converted, Hugging Face, or a pretraining checkpoint), a pretraining run dir "
             "(its newest checkpoint) or a Hub id in the local Hugging Face cache",
    "data": "the task folder (train and dev files by the task's names), or a training file with --dev",
    "out": "run directory: best/, metrics.jsonl, finetune.json (the settings; --config repeats the run), "
           "result.json",
    "dev": "dev file, when --data is a training file (default: the task folder's dev split)",
    "format": "custom task: file format (default: from the run record, for evaluate/predict)",
    "text_columns": "custom task: one text column, or two as a,b (default: from the run record)",
    "label_column": "custom task: label column (default: from the run record)",
    "head": "custom task: classification (labels from train), regression (a number) or multilabel",
    "lr": "peak learning rate (default: the task's: paper Table 14, else 2e-5)",
    "batch_size": "examples per optimizer step (default: the task's: paper Table 14, else 32)",
    "micro_batch_size": "examples per forward pass; accumulation makes up --batch-size (default: --batch-size)",
    "steps": "optimizer steps (default: the paper's for a Table 14 task on its full training set, else from "
             "--epochs)",
    "epochs": "passes over the training set, when --steps is not given (default: 3 where the paper gives no "
              "steps, or on a subset such as --max-train-examples)",
    "warmup_ratio": "linear warmup as a share of the steps (default: the task's: paper warmup / steps, else 0.1)",
    "warmup_steps": "linear warmup steps, instead of --warmup-ratio (default: from --warmup-ratio)",
    "max_seq_length": "tokens per example, longer ones truncated (default: the task's: paper Table 14, else 128)",
    "albert_dropout": "dropout inside the encoder (default: the task's: paper Table 14, else 0)",
    "classifier_dropout": "dropout before the task head (default: the task's, 0.1)",
    "optimizer": "adamw, lamb or adamw_official (the BERT code's AdamW)",
    "weight_decay": "decoupled weight decay",
    "max_grad_norm": "gradient clipping norm",
    "doc_stride": "span tasks: stride between windows over a long context, in tokens",
    "max_query_length": "span tasks: question tokens kept",
    "n_best": "span tasks: candidate answers considered per question",
    "max_answer_length": "span tasks: longest answer, in tokens",
    "precision": "auto: bf16 where the CPU/GPU has fast bf16, fp16 on older GPUs, else fp32",
    "gradient_checkpointing": "recompute activations in the backward pass: less memory, ~30%% slower",
    "seed": "seed of the head's initialisation, dropout and the data order",
    "reinit_pooler": "re-initialise the pooler before fine-tuning (drawn from --seed)",
    "overwrite": "replace the run already in --out (its metrics.jsonl, best/ and result.json); default: refuse",
    "eval_every": "steps between dev evaluations (default: once per epoch, and at the end)",
    "patience": "stop after this many evaluations without a better dev score (0: never stop early)",
    "max_train_examples": "use only the first N training examples (default: all); the schedule then defaults to "
                          "3 epochs",
    "max_eval_examples": "score only the first N dev examples (default: all)",
    "eval_batch_size": "examples per forward pass when scoring",
    "log_every": "steps between training-loss log lines and metrics.jsonl records",
    "device": "cpu, cuda, cuda:N or mps (default: cuda when present, else cpu)",
    "threads": "torch threads (default: torch's choice)",
}
CHOICES = {"format": ("csv", "tsv", "jsonl"), "head": ("classification", "regression", "multilabel"),
           "optimizer": ("adamw", "lamb", "adamw_official"), "precision": PRECISIONS}


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
    add_dataclass_args(p, FinetuneConfig, HELP, required=("model", "data"), skip=("task", "grad_accum"),
                       choices=CHOICES)
    add_alias(p, "--grad-accum", "grad_accum", type=int)  # old: --batch-size was the micro batch
    add_alias(p, "--task", "task")  # the task of a --config run record
    p.config_ignore = ()
    p.set_defaults(func=run_finetune, grad_accum=None)

    e = add_command(sub, "evaluate", "score a fine-tuned model on a split", """
litebert evaluate sst-2 --model runs/sst2 --data glue/SST-2
litebert evaluate mnli --model runs/mnli --data glue/MNLI --split dev_mismatched""")
    e.add_argument("task_name", metavar="TASK", help="the task the model was fine-tuned for")
    _shared(e)
    e.add_argument("--data", required=True, help="task folder or a file of the split")
    e.add_argument("--split", help="split to score (default: the task's dev split)")
    e.add_argument("--limit", type=int, help="score only the first N examples (default: all)")
    e.set_defaults(func=run_evaluate)

    q = add_command(sub, "predict", "write JSONL predictions for a file in the task's format, or for --text", """
litebert predict sst-2 --model runs/sst2 --input glue/SST-2/test.tsv --output preds.jsonl
litebert predict sst-2 --model runs/sst2 --text "a gripping film" --text "dull and long"
litebert predict rte --model runs/rte --text $'A man sleeps.\\tSomeone is awake.'   # a pair: tab between""")
    q.add_argument("task_name", metavar="TASK", help="the task the model was fine-tuned for")
    _shared(q)
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
    f.set_defaults(func=run_fill_mask)


def _shared(p) -> None:
    p.add_argument("--model", required=True, help="fine-tuning run dir (its best/ checkpoint) or model directory")
    p.add_argument("--precision", default="auto", choices=PRECISIONS,
                   help="auto: bf16 where the CPU/GPU has fast bf16, else fp32 (default: auto)")
    p.add_argument("--batch-size", type=int, default=64, help="examples per forward pass (default: 64)")
    p.add_argument("--max-seq-length", type=int,
                   help="tokens per example (default: the run's, from its record; else the task's)")
    for name in CUSTOM:
        p.add_argument("--" + name.replace("_", "-"), choices=CHOICES.get(name), help=HELP[name])


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
    result = finetune(dataclass_from_args(FinetuneConfig, args, task=task))
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
                   texts=args.text, **_custom(args))
    lines = "".join(json.dumps(row, ensure_ascii=False, default=float) + "\n" for row in rows)
    if args.output == "-":
        sys.stdout.write(lines)
        return 0
    # A temp file renamed into place: a full disk leaves no truncated file that looks finished.
    atomic_write(Path(args.output), lambda tmp: tmp.write_text(lines, encoding="utf-8"))
    print(f"{len(rows)} predictions -> {args.output}", file=sys.stderr)
    return 0


def run_fill_mask(args) -> int:
    from litebert.inference import fill_mask, filled_text

    for text, masks in zip(args.texts, fill_mask(args.model, args.texts, top_k=args.top_k)):
        print(text)
        print("  -> " + filled_text(text, masks))
        for i, preds in enumerate(masks):
            print(f"  [MASK] #{i + 1}: " + "  ".join(f"{p.text} ({p.score:.3g})" for p in preds))
    return 0
