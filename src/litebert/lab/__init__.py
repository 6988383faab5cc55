"""The lab: research tooling that ships with litebert but is not part of the library.

    bench.py        the timing engine (interleaved turns, peak memory, calibration GEMM, the workloads) behind
                    `litebert bench` and every script in benchmarks/
    ablate.py       `litebert ablate`: the paper's controlled comparisons at small scale, under equal budgets
    synthetic.py    corpora with one known structure (a Markov chain of made-up words), for learning checks
    shared_data.py  where the optional shared datasets live ($LITEBERT_SHARED_DATA, else ../shared/data beside
                    the repo): for tests, benchmarks, experiments and ablate's default SST-2

The library (everything outside lab/) never imports from here; the lab imports the library like any user.
"""
