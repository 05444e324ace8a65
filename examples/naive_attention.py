"""Profile naive attention: five out-of-place ops, and a copy hidden in the mask step.

python examples/naive_attention.py                 # CPU shape, or the article's shape on CUDA
python examples/naive_attention.py --seq 2048 --device cpu
"""

import sys

from attn.profiling.cli import example_main

if __name__ == "__main__":
    sys.exit(example_main("naive"))
