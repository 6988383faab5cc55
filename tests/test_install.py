"""The package as a user installs it: a wheel built from the source tree, installed into a fresh venv, runs the
`litebert` command end to end there (so the wheel carries every module and its entry point, and nothing reads
files from the checkout).

The fresh venv takes litebert from the wheel only; its dependencies (torch, numpy, ...) come from the environment
running the tests through a .pth file, which saves installing torch again. The test checks that `litebert` is
imported from the venv's own site-packages, never from the checkout or that environment.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "reliability"))
from harness import TINY_MODEL, write_pydoc_corpus  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEPENDENCIES = ("torch", "numpy", "sentencepiece", "safetensors", "tqdm")  # pyproject's [project] dependencies
TIMEOUT = 600


def run(args: list, cwd: Path, env: dict | None = None) -> str:
    """The command's stdout; a failure shows both streams."""
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"{args}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def build_wheel(tmp_path: Path) -> Path:
    """`pip wheel --no-deps` on a copy of the source tree (the build leaves build/ and *.egg-info behind, which
    must not land in the checkout). No build isolation: setuptools is taken from this environment, offline."""
    src = tmp_path / "src-copy"
    for name in ("pyproject.toml", "README.md"):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", tmp_path / "dist",
         src], cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("litebert-*.whl")
    return wheel


def fresh_venv(root: Path) -> tuple[Path, dict]:
    """A new venv whose site-packages sees this environment's dependencies (a .pth file) but not litebert."""
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root).strip())
    places = sorted({str(Path(importlib.import_module(name).__file__).resolve().parents[1]) for name in DEPENDENCIES})
    (site / "dependencies-from-the-test-environment.pth").write_text("\n".join(places) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return python, env


@pytest.mark.slow  # a wheel build and five litebert processes: ~45 s on the 2-core machine under load
def test_a_wheel_installs_into_a_fresh_venv_and_runs_the_pipeline(tmp_path):
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    packaged = {n for n in names if n.startswith("litebert/") and n.endswith(".py")}
    in_tree = {str(p.relative_to(REPO / "src")) for p in (REPO / "src" / "litebert").rglob("*.py")}
    assert packaged == in_tree  # every module, subpackages included
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "litebert = litebert.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()

    python, env = fresh_venv(tmp_path / "venv")
    # the wheel alone: its dependencies are present already (from the .pth), so nothing is fetched
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel], cwd=tmp_path,
        env=env)
    where = run([python, "-c", "import litebert; print(litebert.__file__)"], cwd=tmp_path, env=env).strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), where

    work = tmp_path / "work"
    work.mkdir()
    litebert = tmp_path / "venv" / "bin" / "litebert"  # the entry point's script
    assert run([litebert, "--version"], cwd=work, env=env).strip().endswith("0.1.0")
    write_pydoc_corpus(work / "corpus.txt", 60)
    (work / "model.json").write_text(json.dumps(TINY_MODEL))
    run([litebert, "tokenizer", "train", "--input", "corpus.txt", "--vocab-size", "300", "--out", "tok"], work, env)
    run([litebert, "data", "build", "--input", "corpus.txt", "--tokenizer", "tok", "--out", "store", "--quiet"],
        work, env)
    run([litebert, "pretrain", "--model", "model.json", "--data", "store", "--out", "run", "--steps", "2",
         "--batch-size", "8", "--micro-batch-size", "8", "--max-seq-length", "32", "--max-predictions-per-seq", "5",
         "--eval-batches", "1", "--threads", "1", "--precision", "fp32"], work, env)
    filled = run([litebert, "fill-mask", "--model", "run", "the [MASK] of a function."], work, env).splitlines()[1]
    assert filled.startswith("  -> the ") and "[MASK]" not in filled
    assert (work / "run" / "final" / "README.md").is_file() and (work / "run" / "final" / "model.safetensors").is_file()
