"""The head families' code, one module each (litebert.heads' rows name the class): how a family encodes
examples, runs, decodes outputs into its one result schema, and scores. Every door (CLI predict/evaluate/fill-mask,
`litebert.pipeline`, `serve`, ONNX) and fine-tuning's dev evaluation run a prediction through these classes.
No torch at import: the ONNX path imports them without it."""
