"""`python -m taskdesk` is the same as the `taskdesk` command."""

import sys

from taskdesk.cli import main

sys.exit(main())
