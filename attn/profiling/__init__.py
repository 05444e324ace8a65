"""How we measure: record or read a trace, analyse it, check claims, draw, write the artifacts.

Import what you need from its module (`attn.profiling.run`, `attn.profiling.config`, ...): this
package imports nothing itself, so that `attn.specs` can use `attn.traces.checks` alone.
"""
