"""Helpers shared by the CLI modules: one way to declare a command (help, example), dataclass-driven flags,
hidden aliases for old flag spellings, and `--config FILE`."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_command(sub, name: str, help: str, example: str, description: str | None = None):
    """A sub-command whose help ends with an example (`example`: one or more command lines)."""
    lines = "\n".join("  " + line for line in example.strip().splitlines())
    return sub.add_parser(name, help=help, description=description or help[:1].upper() + help[1:] + ".",
                          epilog=f"example:\n{lines}", formatter_class=argparse.RawDescriptionHelpFormatter)


FIELD_DESTS = "_option_fields"  # the namespace attribute naming the options checked by an options dataclass


def add_alias(parser, old: str, dest: str, **kwargs) -> None:
    """An old spelling of a flag: accepted, not shown in --help, and it never overrides the new flag's default."""
    parser.add_argument(old, dest=dest, help=argparse.SUPPRESS, default=argparse.SUPPRESS, **kwargs)


def add_dataclass_args(parser, cls, required: tuple[str, ...] = (), skip: tuple[str, ...] = (),
                       flags: dict[str, str] | None = None) -> None:
    """One `--flag` per field of an options dataclass, typed from its default (bools become on/off switches).

    The help text and the allowed values come from the field itself (`config.option`): every field says what its
    default means; a non-None default is appended. `flags` renames a field's flag (field -> "--flag")."""
    import dataclasses

    from litebert.config import field_types

    types = field_types(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = (flags or {}).get(f.name, "--" + f.name.replace("_", "-"))
        base = types[f.name][0][0]
        text = field_help(f)  # (tests/test_cli.py fails on an option without a help text)
        if f.default is not None and f.default is not dataclasses.MISSING and f.default != "" \
                and "default" not in text:
            text += f" (default: {f.default})"
        # Choices are shown (metavar) but checked by the config class, whose error names the option and the
        # valid values the same way for the library and the command line.
        choices = f.metadata.get("choices")
        extra = {"metavar": "{" + ",".join(choices) + "}"} if choices else {}
        if base is bool:
            action = parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction,
                                         default=f.default, help=text)
        else:
            default = None if f.name in required or f.default is dataclasses.MISSING else f.default
            action = parser.add_argument(flag, dest=f.name, type=base, default=default,
                                         required=f.name in required, help=text, **extra)
        action.option_field = (f, types[f.name])  # a --config file's value for it is checked as the field is
    # Every field (an old spelling added by add_alias included) is checked by the class when the handler builds it
    # (dataclass_from_args): _checks.check_args leaves them to it, so each rule has one home.
    parser.set_defaults(**{FIELD_DESTS: frozenset(parser.get_default(FIELD_DESTS) or ())
                           | {f.name for f in dataclasses.fields(cls)}})


def field_help(field) -> str:
    """A dataclass field's help text (config.option), with % escaped for argparse."""
    return field.metadata.get("help", "").replace("%", "%%")


def dataclass_from_args(cls, args, **extra):
    import dataclasses

    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    return cls(**{**fields, **extra})


# --------------------------------------------------------------------------------------------- --config FILE


def add_config_option(parser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="read options from a JSON or YAML file (keys are the option names with _ or -; a run "
                             "record this command wrote, finetune.json or run.json, repeats that run); flags given "
                             "on the command line win (default: none)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved options (defaults, --config file, flags) as JSON in the form "
                             "--config reads, and exit without running")


def print_config(options) -> None:
    """--print-config: the options dataclass as JSON that --config reads back to the same options."""
    import dataclasses
    import json

    print(json.dumps(dataclasses.asdict(options), indent=2))


CONFIG_LIMIT = 2 ** 20  # bytes: an options file is a few kilobytes; /dev/zero or a mistyped path to data is not


def read_config_file(path: str) -> dict:
    """The options in a --config file: a flat mapping, or a run record whose options sit under "train"."""
    from litebert.errors import ConfigError
    from litebert.files import parse_json, read_text_checked

    file = Path(path)
    text = read_text_checked(file, ConfigError, limit=CONFIG_LIMIT, prefix="--config ")
    if file.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(f"--config {path}: reading YAML needs PyYAML (pip install pyyaml); or write the "
                              "options as JSON") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"--config {path}: not valid YAML ({e})") from None
    else:
        data = parse_json(text, f"--config {path}", ConfigError)
    if isinstance(data, dict) and isinstance(data.get("train"), dict):  # pretrain's run.json
        data = data["train"]
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a mapping of option names to values")
    return {k.replace("-", "_"): v for k, v in data.items()}


def config_path_in(argv: list[str]) -> str | None:
    """The FILE of `--config FILE` / `--config=FILE` in argv, if any (read before parsing: the file may provide
    options that are otherwise required)."""
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def _checked_file_value(action, value, shown: str):
    """A --config value for `action`, checked as the option's own field checks it (type, choices, rule), or, for
    a flag without a field, against the flag's type."""
    from litebert.config import check_field, check_value

    if hasattr(action, "option_field"):
        field, types = action.option_field
        return check_field(field, types, value, shown)
    if isinstance(action, (argparse.BooleanOptionalAction, argparse._StoreTrueAction, argparse._StoreFalseAction)):
        kind = bool
    else:
        kind = action.type if action.type in (int, float, str) else str
    return check_value(value, (kind,), True, shown, action.choices)


def apply_config_file(parser, path: str, ignore: tuple[str, ...] = ()) -> None:
    """The file's values become `parser`'s defaults (flags on the command line still win).

    An unknown key is an error naming it (a typo must not be dropped without a word); keys in `ignore` (fields a
    run record holds that the command does not take as options) are skipped."""
    from litebert.errors import ConfigError

    values = read_config_file(path)
    known = {a.dest for a in parser._actions}
    unknown = sorted(k for k in values if k not in known and k not in ignore)
    if unknown:
        raise ConfigError(f"--config {path}: unknown option(s) {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(known - {'help', 'config', 'func'}))}")
    for action in parser._actions:  # argparse converts what is typed on the line, never a default: check here
        if action.dest in values and action.dest not in ("help", "config"):
            values[action.dest] = _checked_file_value(action, values[action.dest], f"--config {path}: key "
                                                                                   f"'{action.dest}' =")
    parser.set_defaults(**{k: v for k, v in values.items() if k in known and k != "config"})
    for action in parser._actions:  # a required option the file provides is no longer required on the line
        if action.dest in values and values[action.dest] is not None:
            action.required = False
