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
