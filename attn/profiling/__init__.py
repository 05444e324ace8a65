"""How we make traces: run variants under the profiler, time them, sweep, benchmark, take
screenshots, and the command line that ties it together with the reading half (`attn.traces`).

Import what you need from its module (`attn.profiling.run`, `attn.profiling.config`, ...): this
package imports nothing itself, so that `python -m attn.profiling analyze` loads no torch.
"""
