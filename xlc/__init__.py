"""xlc: an XLA-style ahead-of-time tensor compiler."""
__version__ = "0.1.0"
