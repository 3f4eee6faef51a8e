"""taso_relay: a TASO-style graph superoptimizer for Apache TVM (Relax).

`TASOPass` is imported lazily so that the graph form, generator and verifier
work without loading TVM.
"""
__version__ = "0.1.0"


def __getattr__(name):
    if name in ("TASOPass", "taso_pipeline"):
        from . import passes
        return getattr(passes, name)
    raise AttributeError(name)


__all__ = ["TASOPass", "__version__", "taso_pipeline"]
