"""Claims and the checks that decide them: on a run's trace and shapes, on a set's benchmark,
dispatch and timing rows, on a folder of ranks, on someone else's trace; the roofline the benchmark
checks use; and the tables under the benchmark and dispatch figures, which show each row's verdict
beside the check that decides it.

Above read, common and figures; beside ranks and compare, which it does not import. What a variant
claims lives in attn.specs and comes in as data.
"""
