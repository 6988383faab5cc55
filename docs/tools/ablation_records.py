"""Carry a `litebert ablate` study across machines without its checkpoints.

A thorough study takes longer than one machine is lent for. What a finished variant leaves for the report is small:
its result.json, model_config.json, pretrain/run.json and pretrain/metrics.jsonl (tens of kB, against ~20 MB of
checkpoints). `save` copies those of every finished run in STUDY/_runs into RECORDS, with a fingerprint of the
study's data (the tokenizer model and the token store); `restore` copies them back into a new STUDY whose data was
rebuilt from the same corpus. `litebert ablate` then treats them as finished (it never re-runs a run with a
result.json) and trains only the rest. Restore to the --out path the study was run with: a run's id covers its
settings, and those name the study's data folder.

    python docs/tools/ablation_records.py save runs/ablate-thorough docs/ablations/records
    python docs/tools/ablation_records.py restore docs/ablations/records runs/ablate-thorough \
        --corpus ../shared/data/gutenberg

`restore` builds the study's data first (as `litebert ablate` would, from --corpus), and refuses when it differs from the data the records were trained on: mixing runs of two
different stores in one table would compare variants that did not see the same tokens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

FILES = ("result.json", "model_config.json", "pretrain/run.json", "pretrain/metrics.jsonl")


def data_fingerprint(study: Path) -> dict[str, str]:
    """sha256 of the files that decide what every variant trains on: the tokenizer model and the token store."""
    data = study / "_data"
    files = [data / "tokenizer" / "spiece.model", data / "store" / "meta.json",
             *sorted((data / "store").glob("*/*.bin"))]
    missing = [str(f) for f in files if not f.is_file()]
    if missing or not any(f.suffix == ".bin" for f in files):
        raise SystemExit(f"{study}: no built study data ({', '.join(missing) or 'no store files'}); run "
                         "`litebert ablate` on it first (it builds _data before training)")
    # meta.json holds absolute build paths and times; its build inputs' checksums are what matter
    meta = json.loads((data / "store" / "meta.json").read_text())
    inputs = sorted(i["sha256"] for i in meta.get("build", {}).get("inputs", []))
    fingerprint = {str(f.relative_to(data)): hashlib.sha256(f.read_bytes()).hexdigest() for f in files
                   if f.name != "meta.json"}
    fingerprint["store/meta.json:inputs"] = hashlib.sha256(json.dumps(inputs).encode()).hexdigest()
    return fingerprint


def copy_record(source: Path, target: Path) -> None:
    for name in FILES:
        if (source / name).is_file():  # a random-init reference has no pretraining files
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / name, target / name)


def save(study: Path, records: Path) -> None:
    runs = sorted(p.parent for p in (study / "_runs").glob("*/result.json"))
    if not runs:
        raise SystemExit(f"{study}/_runs: no finished run (no result.json)")
    records.mkdir(parents=True, exist_ok=True)
    fingerprint = data_fingerprint(study)
    saved = records / "data.json"
    if saved.is_file() and json.loads(saved.read_text()) != fingerprint:
        raise SystemExit(f"{records}: holds runs of other data than {study}/_data; use another RECORDS dir")
    saved.write_text(json.dumps(fingerprint, indent=2) + "\n")
    for run in runs:
        copy_record(run, records / run.name)
        print(f"saved {run.name}")


def restore(records: Path, study: Path, corpus: list[str], vocab_size: int) -> None:
    saved = records / "data.json"
    if not saved.is_file():
        raise SystemExit(f"{records}: no data.json (not made by `save`)")
    if not (study / "_data" / "store" / "meta.json").is_file():
        from litebert.lab.ablate import AblateConfig, prepare_data

        prepare_data(AblateConfig(suite="objective", corpus=corpus, out=str(study), vocab_size=vocab_size))
    expected, actual = json.loads(saved.read_text()), data_fingerprint(study)
    if expected != actual:
        differ = sorted(k for k in expected.keys() | actual.keys() if expected.get(k) != actual.get(k))
        raise SystemExit(f"{study}/_data differs from the data of {records}: {', '.join(differ)}. Rebuild it from "
                         "the same corpus and vocab size, or start a new study")
    for run in sorted(p.parent for p in records.glob("*/result.json")):
        target = study / "_runs" / run.name
        if (target / "result.json").is_file():
            print(f"kept {run.name} (already finished here)")
            continue
        copy_record(run, target)
        print(f"restored {run.name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("save", help="copy finished runs' records out of a study")
    s.add_argument("study", type=Path)
    s.add_argument("records", type=Path)
    r = sub.add_parser("restore", help="copy records into a study whose data is built")
    r.add_argument("records", type=Path)
    r.add_argument("study", type=Path)
    r.add_argument("--corpus", nargs="+", default=[], help="the study's --corpus, to build its data if absent")
    r.add_argument("--vocab-size", type=int, default=8000, help="the study's --vocab-size")
    args = ap.parse_args()
    if args.command == "save":
        save(args.study, args.records)
    else:
        restore(args.records, args.study, args.corpus, args.vocab_size)


if __name__ == "__main__":
    main()
