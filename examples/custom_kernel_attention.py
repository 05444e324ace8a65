"""Profile one of our own kernels: the C++ CPU op, the CUDA kernel or the Triton kernel.

python examples/custom_kernel_attention.py --impl cpu
python examples/custom_kernel_attention.py --impl cuda --seq 4096
"""

import sys

from attn.profiling.cli import example_main

IMPLS = {"cpu": "custom_cpu", "cuda": "custom_cuda", "triton": "custom_triton"}

if __name__ == "__main__":
    sys.exit(example_main("impl", choose=IMPLS))
