"""`python -m xlc.cli ARGS` runs the `xlc` console script."""
import sys

from xlc.cli.main import main

sys.exit(main())
