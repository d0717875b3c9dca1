"""The `xlc` console script (`xlc.cli:main`): argument parsing and exit codes (`main.py`), the
verbs (`commands.py`) and the embedded demo model (`demo.py`). The top layer: it may import
anything in xlc; nothing in xlc imports it."""
from xlc.cli.main import main

__all__ = ["main"]
