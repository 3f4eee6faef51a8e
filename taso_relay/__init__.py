"""taso_relay: a TASO-style graph superoptimizer for Apache TVM (Relax).

`TASOPass` is imported lazily so that the graph form, generator and verifier
work without loading TVM. Where TVM is already loaded, the pass module is
imported at once, so `tvm.compile(..., relax_pipeline="taso")` finds its
pipeline after a plain `import taso_relay`.
"""
import sys

__version__ = "0.1.0"


def __getattr__(name):
    if name in ("TASOPass", "taso_pipeline"):
        from . import passes
        return getattr(passes, name)
    raise AttributeError(name)


__all__ = ["TASOPass", "__version__", "taso_pipeline"]

if sys.modules.get("tvm") is not None:
    try:
        from . import passes  # noqa: E402,F401  (registers the "taso" Relax pipeline)
    except ImportError:  # a TVM that cannot serve the pass: the graph form, generator and verifier still work
        pass
