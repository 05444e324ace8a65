"""How we measure: run a variant under torch.profiler, summarise it, draw it, write the artifacts."""

from attn.profiling.artifacts import ProfilingError, profile_variant, write_environment
from attn.profiling.config import ProfileConfig, default_config
from attn.profiling.environment import hardware_slug

__all__ = [
    "ProfileConfig",
    "ProfilingError",
    "default_config",
    "hardware_slug",
    "profile_variant",
    "write_environment",
]
