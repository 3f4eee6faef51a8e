"""Models nobody here wrote: PyTorch and transformers exports, checked through the pass (opt-in, needs torch)."""
