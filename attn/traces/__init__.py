"""How we read a trace, ours or anyone's: parse, scrub, count, check claims, diagnose, diff, draw.

Needs no torch (numpy, orjson, rich and matplotlib only) and no variant: what a variant claims
comes in as data from `attn.specs`. Import what you need from its module (`attn.traces.trace`,
`attn.traces.diagnose`, ...).
"""
