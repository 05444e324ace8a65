"""Profile F.scaled_dot_product_attention pinned to one backend.

python examples/sdpa_attention.py --backend flash
python examples/sdpa_attention.py --backend math --seq 4096
"""

import sys

from attn.profiling.cli import example_main

BACKENDS = {b: f"sdpa_{b}" for b in ("math", "efficient", "flash", "cudnn")}

if __name__ == "__main__":
    sys.exit(example_main("backend", choose=BACKENDS))
