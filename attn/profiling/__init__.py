"""How we measure: record or read a trace, analyse it, check claims, draw, write the artifacts."""

from attn.profiling.config import ProfileConfig, default_config
from attn.profiling.environment import hardware_slug
from attn.profiling.run import ProfilingError, finish_set, profile_example, profile_variant

__all__ = [
    "ProfileConfig",
    "ProfilingError",
    "default_config",
    "finish_set",
    "hardware_slug",
    "profile_example",
    "profile_variant",
]
