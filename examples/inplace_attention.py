"""Profile in-place attention: the naive five steps with `mul_` and `masked_fill_`.

python examples/inplace_attention.py
"""

import sys

from attn.profiling.cli import example_main

if __name__ == "__main__":
    sys.exit(example_main("inplace"))
