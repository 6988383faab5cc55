"""`litebert convert` (TF / TF-Hub / albert_zh / Hugging Face -> our directory) and `litebert export-onnx`."""

from litebert.cli._common import add_command


def register(sub) -> None:
    from litebert.convert import HEADS, SOURCES
    from litebert.export import TASKS

    c = add_command(sub, "convert", "convert a TF / TF-Hub / albert_zh checkpoint or a Hugging Face ALBERT dir "
                                    "into a litebert model directory (no TensorFlow needed)",
                    "litebert convert albert_base/ --out albert-base-v2      # Google's release, unpacked")
    c.add_argument("src", metavar="SRC", help="TF checkpoint prefix, .index file or directory; TF-Hub module "
                                              "directory; or a Hugging Face directory (safetensors only)")
    c.add_argument("--out", required=True, help="output model directory")
    c.add_argument("--from", dest="source", choices=SOURCES, default="auto",
                   help="checkpoint kind (default: auto, from the files and tensor names)")
    c.add_argument("--allow-unused", action="store_true",
                   help="drop tensors that map to no parameter (listed) instead of failing (default: fail)")
    c.add_argument("--config", help="official albert_config.json (default: the one beside the checkpoint)")
    c.add_argument("--vocab", help="tokenizer file: SentencePiece *.model or WordPiece vocab.txt "
                                   "(default: the one beside the checkpoint)")
    c.add_argument("--head", choices=HEADS, default="auto",
                   help="multiple-choice: a TF checkpoint's one-row output_weights is the official run_race head "
                        "(default: auto, from the tensor names)")
    c.set_defaults(func=run_convert)

    e = add_command(sub, "export-onnx", "export a model or run directory to ONNX (graph + tokenizer + config), "
                                        "checked in onnxruntime",
                    "litebert export-onnx --model runs/sst2 --out sst2-onnx/")
    # --model like every other command; the positional DIR is kept because earlier releases documented it.
    e.add_argument("--model", help="litebert or Hugging Face ALBERT model directory, or a fine-tuning run "
                                   "directory (its best checkpoint)")
    e.add_argument("model_dir", metavar="DIR", nargs="?", help="the same as --model")
    e.add_argument("--task", choices=list(TASKS), help="which model class and outputs to export (default: the "
                                                       "directory's own head)")
    e.add_argument("--out", required=True, help="output folder (gets model.onnx, config.json, the tokenizer and "
                                                "inference.json), or an .onnx file name (the rest goes beside it)")
    e.add_argument("--quantize", choices=("int8",),
                   help="onnxruntime dynamic int8 quantization of the graph (default: none, fp32)")
    e.add_argument("--opset", type=int, default=17, help="ONNX opset (default: 17)")
    e.add_argument("--graph-only", action="store_true",
                   help="export a directory without a tokenizer: the graph and config.json alone, which `serve` "
                        "does not take (default: refuse such a directory)")
    e.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript",
                   help="torch's TorchScript exporter (default, no extra package) or the dynamo one (needs onnxscript)")
    e.add_argument("--no-verify", dest="verify", action="store_false",
                   help="skip the onnxruntime-vs-PyTorch check (default: check when onnxruntime is installed)")
    e.set_defaults(func=run_export)


def run_convert(args) -> int:
    from litebert.convert import convert_checkpoint

    report = convert_checkpoint(args.src, args.out, source=args.source, allow_unused=args.allow_unused,
                                config=args.config, vocab=args.vocab, head=args.head)
    print(report.format_report())
    return 0


def run_export(args) -> int:
    from litebert.errors import ConfigError
    from litebert.export import export_onnx

    if (args.model is None) == (args.model_dir is None):
        raise ConfigError("export-onnx: give the model directory once, as --model DIR (or the positional DIR)")
    result = export_onnx(args.model or args.model_dir, args.out, args.task, opset=args.opset, exporter=args.exporter,
                         verify=args.verify, quantize=args.quantize, graph_only=args.graph_only)
    print(result.format())
    return 0
