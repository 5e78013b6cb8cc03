"""Decoders and Python rules for one message family each (storage errnos, Slurm step errors, CUDA
error names, ...): one module per family, imported by :func:`slurm_attrib.engine.registry.load_all`."""
