"""Helpers shared by the CLI modules."""

from __future__ import annotations

from pathlib import Path


def load_config(spec: str):
    """A preset name, a config JSON file (any dialect) or a model directory."""
    from litebert.config import PRESETS, AlbertConfig
    from litebert.errors import ConfigError

    if spec in PRESETS:
        return AlbertConfig.from_preset(spec)
    path = Path(spec)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return AlbertConfig.from_json(path)
    raise ConfigError(f"{spec!r} is neither a preset ({', '.join(sorted(PRESETS))}) nor a config file")


def add_dataclass_args(parser, cls, required: tuple[str, ...] = (), help: dict[str, str] | None = None,
                       skip: tuple[str, ...] = ()) -> None:
    """One `--flag` per field of a config dataclass, typed from its default (bools become on/off switches)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = hints[f.name]
        base = next((t for t in typing.get_args(kind) if t is not type(None)), kind)
        text = (help or {}).get(f.name)
        if base is bool:
            parser.add_argument(flag, action=argparse_bool(), default=f.default, help=text)
        else:
            parser.add_argument(flag, type=base, default=None if f.name in required else f.default,
                                required=f.name in required, help=text or f"(default: {f.default})")


def argparse_bool():
    import argparse

    return argparse.BooleanOptionalAction


def dataclass_from_args(cls, args, **extra):
    import dataclasses

    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    return cls(**{**fields, **extra})
