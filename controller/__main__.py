"""`python -m goosectl` is `goosectl`."""

import sys

from goosectl.controller.cli import main

sys.exit(main())
