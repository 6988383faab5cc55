"""Multi-node runs through torchrun, simulated on loopback: two torchrun agents are two "nodes" (`--nnodes 2
--node-rank 0/1`, a c10d rendezvous on 127.0.0.1, one gloo process each), each started with its own command line
and environment, as on two machines.

- A 2-node run gives the per-step losses and the weights of the single-node 2-process run (conftest's "dual") at
  the same global batch, within 1e-5 in fp32; only the global rank 0 writes into the run dir (a file audit of
  every process, file_audit_probe.py): each checkpoint is renamed into place once, by rank 0.
- A node whose process is SIGKILLed once is restarted by its elastic agent (`--max-restarts 1`); the job ends
  with the uninterrupted curve and weights, and on resume every rank read the same checkpoint (checkpoint-4).
  (This failed before each attempt opened a store of its own: the surviving node's agent counts no restart, so its
  new process took the dead attempt's keys and could not connect: litebert.distributed.)
- Nodes that do not see the same run dir (node-local storage), or the same token store, or a node where the store
  is missing: every process stops at start with an error naming the problem, instead of hanging or training.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness import assert_same_weights, finish, free_port, kill_tagged, losses, pretrain_args, start

PROBE = (str(Path(__file__).with_name("file_audit_probe.py")),)


def start_nodes(tiny, nodes: list[dict], max_restarts: int = 0, node_env: dict[int, dict] | None = None):
    """One torchrun agent per entry of `nodes` (its pretrain_args overrides, `out` included), all meeting at one
    fresh loopback rendezvous."""
    endpoint = f"127.0.0.1:{free_port()}"
    return [start(pretrain_args(tiny, **overrides), nproc=1, max_restarts=max_restarts, program=PROBE,
                  node=(rank, len(nodes), endpoint), **(node_env or {}).get(rank, {}))
            for rank, overrides in enumerate(nodes)]


def finish_nodes(procs) -> list:
    """Wait for every agent; a hang of one kills them all (and their workers) and fails the test."""
    try:
        return [finish(p) for p in procs]
    except AssertionError:
        for p in procs:
            kill_tagged(p.tag)
        raise


def file_audits(done) -> list[tuple[int, dict]]:
    """(global rank, audit) of every worker that exited normally, in each agent's output order."""
    found = []
    for proc in done:
        for line in proc.stderr.splitlines():
            if "file audit rank=" in line:
                head, body = line.split("file audit rank=", 1)[1].split(": ", 1)
                found.append((int(head), json.loads(body)))
    return found


def test_two_nodes_equal_one_node_and_only_global_rank_0_writes(tiny_data, reference_runs, tmp_path):
    run = tmp_path / "run"
    done = finish_nodes(start_nodes(tiny_data, [{"out": run}] * 2))
    for proc in done:
        assert proc.returncode == 0, proc.stderr[-4000:]
    dual = reference_runs["dual"]
    np.testing.assert_allclose(losses(run), losses(dual), rtol=0, atol=1e-5)
    assert_same_weights(run / "checkpoint-8", dual / "checkpoint-8", atol=1e-5)
    audits = dict(file_audits(done))
    assert sorted(audits) == [0, 1], done[0].stderr[-3000:]
    placed = [dst for _, dst in audits[0]["rename"] if dst.startswith("checkpoint-")]
    assert placed == ["checkpoint-2", "checkpoint-4", "checkpoint-6", "checkpoint-8"]
    assert {k: v for k, v in audits[1].items() if k != "read"} == {"write": [], "mkdir": [], "rename": []}


def test_a_node_killed_once_is_restarted_and_every_rank_resumes_from_the_same_checkpoint(tiny_data, reference_runs,
                                                                                          tmp_path):
    run, once = tmp_path / "run", tmp_path / "fault-fired"
    fault = {"LITEBERT_FAULT": "kill:5", "LITEBERT_FAULT_ONCE": str(once)}  # node 1's process, whatever its rank
    done = finish_nodes(start_nodes(tiny_data, [{"out": run}] * 2, max_restarts=1, node_env={1: fault}))
    for proc in done:
        assert proc.returncode == 0, proc.stderr[-4000:]
    assert once.exists()  # node 1's process really died once
    stderr = "".join(p.stderr for p in done)
    assert f"resumed from {run / 'checkpoint-4'} at step 4" in stderr
    dual = reference_runs["dual"]
    np.testing.assert_allclose(losses(run), losses(dual), rtol=0, atol=1e-5)
    assert_same_weights(run / "checkpoint-8", dual / "checkpoint-8", atol=1e-5)
    # The last process of each node is the restarted one: both read checkpoint-4's training state and no other
    # committed one (rank 0 also reads back its own saves in their temp dirs).
    last = {}
    for rank, audit in file_audits(done):
        last[rank] = audit
    assert sorted(last) == [0, 1]
    for rank, audit in last.items():
        states = sorted({p for p in audit["read"] if p.startswith("checkpoint-") and p.endswith("trainer_state.pt")})
        assert states == ["checkpoint-4/trainer_state.pt"], (rank, audit["read"])


def test_nodes_that_do_not_share_the_run_dir_or_the_store_stop_at_start(tiny_data, tmp_path):
    from litebert.data.store_build import build_store

    store, tokenizer, _ = tiny_data
    other = build_store([store.parent / "corpus.txt"], tokenizer, tmp_path / "other-store", validation_fraction=0.2)
    run = tmp_path / "run"
    jobs = {  # what node 1 sees differently -> the error every process must stop with
        "run dir": ([{"out": run}, {"out": tmp_path / "node1-local-run"}],
                    "is not the run directory rank 0 writes to (the token rank 0 wrote there reads 'nothing"),
        "store": ([{"out": tmp_path / "run2"}, {"out": tmp_path / "run2", "data": other.path}],
                  "read another token store than rank 0"),
        "no store": ([{"out": tmp_path / "run3"}, {"out": tmp_path / "run3", "data": tmp_path / "missing"}],
                     "is not a token store"),
    }
    started = {name: start_nodes(tiny_data, nodes) for name, (nodes, _) in jobs.items()}
    for name, procs in started.items():
        for node, proc in enumerate(finish_nodes(procs)):
            assert proc.returncode != 0, (name, node)
            assert jobs[name][1] in proc.stderr and "exitcode  : 2" in proc.stderr, (name, node, proc.stderr[-3000:])
            assert "step 1/" not in proc.stderr  # nothing was trained
    assert not (run / "metrics.jsonl").exists() and not (tmp_path / "node1-local-run" / "metrics.jsonl").exists()
