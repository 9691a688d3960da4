"""The bundled offline benchmark: analyst questions over the BIRD `regional_sales` database and the
documents of its fictional owner, generated with execution-grounded answers by `generate.py`."""

from .loader import BUNDLED_ROOT, BundledBenchmark, load_bundled

__all__ = ["BUNDLED_ROOT", "BundledBenchmark", "load_bundled"]
