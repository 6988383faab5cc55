"""`litebert ARGS` with an audit hook (sys.addaudithook) that records what this process does under the run dir
(--out): files opened for writing or for reading, directories made, renames. At exit it prints one line on stderr,
`file audit rank=R: {json}`. Run under torchrun by test_multinode.py, which reads from it who wrote each
checkpoint and which checkpoint each rank read on resume. (A SIGKILLed process prints nothing.)"""

import atexit
import json
import os
import sys

from litebert.cli import main

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT


def watch(run_dir: str) -> dict[str, list]:
    root = os.path.abspath(run_dir) + os.sep
    seen: dict[str, list] = {"write": [], "read": [], "mkdir": [], "rename": []}

    def inside(path) -> str | None:
        if not isinstance(path, (str, bytes, os.PathLike)):
            return None  # an open file descriptor
        full = os.path.abspath(os.fsdecode(path))
        return full[len(root):] if full.startswith(root) else None

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            rel = inside(path)
            if rel is not None:
                writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & WRITE_FLAGS)
                seen["write" if writes else "read"].append(rel)
        elif event == "os.mkdir" and inside(args[0]) is not None:
            seen["mkdir"].append(inside(args[0]))
        elif event == "os.rename" and inside(args[1]) is not None:
            seen["rename"].append([inside(args[0]), inside(args[1])])

    sys.addaudithook(hook)
    return seen


if __name__ == "__main__":
    argv = sys.argv[1:]
    seen = watch(argv[argv.index("--out") + 1])
    atexit.register(lambda: print(f"file audit rank={os.environ.get('RANK', '0')}: {json.dumps(seen)}",
                                  file=sys.stderr, flush=True))
    sys.exit(main(argv))
